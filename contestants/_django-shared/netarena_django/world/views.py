"""TechEmpower's database routes as plain sync views on Django's ORM. Each World row is its own query
(objects.get); updates write with one bulk_update (a single UPDATE ... CASE, in its own transaction)."""
from django.http import JsonResponse
from django.shortcuts import render

from netarena_django.world.cache import WORLD
from netarena_django.world.models import Fortune, World
from netarena_shared import world


def read_worlds(n):
    return [{"id": w.id, "randomNumber": w.randomnumber}
            for w in (World.objects.get(id=id_) for id_ in world.random_ids(n))]


def db(request):
    w = World.objects.get(id=world.random_id())
    return JsonResponse({"id": w.id, "randomNumber": w.randomnumber})


def queries(request):
    return JsonResponse(read_worlds(world.queries_count(request.GET.get("queries"))), safe=False)


def updates(request):
    rows = read_worlds(world.queries_count(request.GET.get("queries")))
    for row in rows:
        row["randomNumber"] = world.random_id()
    World.objects.bulk_update([World(id=id_, randomnumber=number) for number, id_ in world.updated_last(rows)],
                              ["randomnumber"])
    return JsonResponse(rows, safe=False)


def cached_queries(request):
    ids = world.random_ids(world.queries_count(request.GET.get("count")))
    return JsonResponse([{"id": i, "randomNumber": WORLD[i]} for i in ids], safe=False)


def fortunes(request):
    rows = world.sorted_fortunes(Fortune.objects.values_list("id", "message"))
    # Django's template engine escapes each message (autoescaping is on by default).
    return render(request, "fortunes.html", {"fortunes": rows})
