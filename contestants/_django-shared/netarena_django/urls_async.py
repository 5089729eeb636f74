from django.urls import path

from netarena_django import views_async as views

urlpatterns = [
    path("hello", views.hello),
    path("bytes/<int:n>", views.bytes_body),
    path("json", views.json_message),
    path("sleep/<int:ms>", views.sleep),
    path("mongo/<str:name>", views.mongo),
]
