"""WSGI entry point (Django's own, as `startproject` writes it), served by gunicorn in django-wsgi-gunicorn."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "netarena_django.settings")
application = get_wsgi_application()

if os.environ.get("NETARENA_POSTGRESQL_URL"):
    # cached-queries' copy of World, read once as the worker process starts (gunicorn imports this module in
    # each worker), so that no request of that scenario queries the database.
    from netarena_django.world.cache import fill

    fill()
