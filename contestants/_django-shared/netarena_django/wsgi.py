"""WSGI entry point (Django's own, as `startproject` writes it), served by gunicorn in django-wsgi-gunicorn."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "netarena_django.settings")
application = get_wsgi_application()

if os.environ.get("NETARENA_POSTGRESQL_URL"):
    # cached-queries' copy of World, read once as the app loads: gunicorn --preload loads it in the arbiter
    # before it listens and forks, so no request (nor a verification's count) ever sees that read. The
    # connection is closed so that no worker inherits it: each opens its own.
    from django.db import connections

    from netarena_django.world.cache import fill

    fill()
    connections.close_all()
