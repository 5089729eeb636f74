"""WSGI entry point (Django's own, as `startproject` writes it), served by gunicorn in django-wsgi-gunicorn."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "netarena_django.settings")
application = get_wsgi_application()
