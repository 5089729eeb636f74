from django.urls import path

from netarena_django import views_async as views
from netarena_django.world import views_async as world

urlpatterns = [
    path("hello", views.hello),
    path("bytes/<int:n>", views.bytes_body),
    path("json", views.json_message),
    path("sleep/<int:ms>", views.sleep),
    path("mongo/<str:name>", views.mongo),
    path("db", world.db),
    path("queries", world.queries),
    path("updates", world.updates),
    path("cached-queries", world.cached_queries),
    path("fortunes", world.fortunes),
]
