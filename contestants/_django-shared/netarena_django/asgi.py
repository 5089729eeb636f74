"""ASGI entry point (Django's own, as `startproject` writes it), served by uvicorn in django-asgi-uvicorn."""
import os
from concurrent.futures import ThreadPoolExecutor

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "netarena_django.settings_asgi")
application = get_asgi_application()

if os.environ.get("NETARENA_POSTGRESQL_URL"):
    # cached-queries' copy of World, read once as each worker process imports the app, before it accepts.
    # uvicorn imports it inside its running event loop, where Django refuses sync ORM calls, so the read runs
    # in a thread of its own, which then closes its connection (Django's connections are per thread; the async
    # views query through the one thread Django keeps for sync code).
    from django.db import connections

    from netarena_django.world.cache import fill

    def fill_and_close():
        try:
            fill()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(fill_and_close).result()
