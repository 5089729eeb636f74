"""cached-queries' in-process copy of World, filled when the worker process starts (wsgi.py), never per request."""
from netarena_django.world.models import World

WORLD = {}


def fill():
    WORLD.update(World.objects.values_list("id", "randomnumber"))
