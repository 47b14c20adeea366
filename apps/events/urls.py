from django.urls import path

from apps.events import api

urlpatterns = [
    path("events", api.EventListApi.as_view()),
    path("events/<str:id>", api.EventDetailApi.as_view()),
]
