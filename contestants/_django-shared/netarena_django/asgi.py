"""ASGI entry point (Django's own, as `startproject` writes it), served by uvicorn in django-asgi-uvicorn."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "netarena_django.settings_asgi")
application = get_asgi_application()
