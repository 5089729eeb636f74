"""Plain function views, for the WSGI server: time.sleep blocks the worker process, as it would in any sync
Django view (that is the difference from the async views the catalog's sleep scenario shows)."""
import time

from django.http import Http404, HttpResponse, JsonResponse

from netarena_shared.bodies import BYTES_BODIES, HELLO
from netarena_shared.mongo import sync_docs_collection


def hello(request):
    return HttpResponse(HELLO, content_type="text/plain")


def bytes_body(request, n):
    body = BYTES_BODIES.get(n)
    if body is None:
        raise Http404("unknown size")
    return HttpResponse(body, content_type="application/octet-stream")


def json_message(request):
    return JsonResponse({"message": "Hello, World!"})


def sleep(request, ms):
    time.sleep(ms / 1000)
    return HttpResponse(f"slept {ms}", content_type="text/plain")


def mongo(request, name):
    # One query by _id through pymongo's synchronous MongoClient, one per worker process (netarena_shared.mongo).
    doc = sync_docs_collection().find_one({"_id": name})
    if doc is None:
        raise Http404("no such document")
    return JsonResponse(doc)
