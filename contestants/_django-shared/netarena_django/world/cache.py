"""cached-queries' in-process copy of World, filled as the app loads (wsgi.py, asgi.py), never per request."""
from netarena_django.world.models import World

WORLD = {}


def fill():
    WORLD.update(World.objects.values_list("id", "randomnumber"))
