"""The minimal Django project shared by django-asgi-uvicorn and django-wsgi-gunicorn (not a contestant: the
leading underscore of contestants/_django-shared keeps it out of discovery).

One settings module, two sets of views: async views for the ASGI server (Django's async docs: under ASGI a
sync view is handed to a thread with sync_to_async, the same single thread for every sync view, so a fully
asynchronous stack needs async views and async-capable middleware, which Django's own are) and plain sync
views for the WSGI server. asgi.py and wsgi.py, Django's own entry points, each name their settings module,
which picks the URLconf.
"""
