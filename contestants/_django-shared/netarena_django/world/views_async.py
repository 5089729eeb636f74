"""TechEmpower's database routes as async views on Django's async ORM (aget, abulk_update, async iteration), for
the ASGI server; the same queries as the sync views (views.py). Django runs each async ORM call in the one
thread it keeps per process for sync code (sync_to_async, thread-sensitive), on its one persistent connection:
a request's queries still go one at a time, each World row its own aget."""
from django.http import JsonResponse
from django.shortcuts import render

from netarena_django.world.cache import WORLD
from netarena_django.world.models import Fortune, World
from netarena_shared import world


async def read_worlds(n):
    return [{"id": w.id, "randomNumber": w.randomnumber}
            for w in [await World.objects.aget(id=id_) for id_ in world.random_ids(n)]]


async def db(request):
    return JsonResponse((await read_worlds(1))[0])


async def queries(request):
    return JsonResponse(await read_worlds(world.queries_count(request.GET.get("queries"))), safe=False)


async def updates(request):
    rows = await read_worlds(world.queries_count(request.GET.get("queries")))
    for row in rows:
        row["randomNumber"] = world.random_id()
    await World.objects.abulk_update(
        [World(id=id_, randomnumber=number) for number, id_ in world.updated_last(rows)], ["randomnumber"])
    return JsonResponse(rows, safe=False)


async def cached_queries(request):
    ids = world.random_ids(world.queries_count(request.GET.get("count")))
    return JsonResponse([{"id": i, "randomNumber": WORLD[i]} for i in ids], safe=False)


async def fortunes(request):
    rows = world.sorted_fortunes([row async for row in Fortune.objects.values_list("id", "message")])
    # Django's template engine escapes each message (autoescaping is on by default); rendering reads no database.
    return render(request, "fortunes.html", {"fortunes": rows})
