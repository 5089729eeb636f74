"""Async function views, for the ASGI server: each runs on the worker's event loop (no thread hop), so
asyncio.sleep and the asyncio MongoDB client wait without holding anything else up."""
import asyncio

from django.http import Http404, HttpResponse, JsonResponse

from netarena_shared.bodies import BYTES_BODIES, HELLO
from netarena_shared.mongo import docs_collection


async def hello(request):
    return HttpResponse(HELLO, content_type="text/plain")


async def bytes_body(request, n):
    body = BYTES_BODIES.get(n)
    if body is None:
        raise Http404("unknown size")
    return HttpResponse(body, content_type="application/octet-stream")


async def json_message(request):
    return JsonResponse({"message": "Hello, World!"})


async def sleep(request, ms):
    await asyncio.sleep(ms / 1000)
    return HttpResponse(f"slept {ms}", content_type="text/plain")


async def mongo(request, name):
    # One query by _id through PyMongo's asyncio client, one per worker process (netarena_shared.mongo).
    doc = await docs_collection().find_one({"_id": name})
    if doc is None:
        raise Http404("no such document")
    return JsonResponse(doc)
