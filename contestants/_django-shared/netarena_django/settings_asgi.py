"""The ASGI entry's settings: the shared ones, with the async views."""
from netarena_django.settings import *  # noqa: F401,F403

ROOT_URLCONF = "netarena_django.urls_async"
