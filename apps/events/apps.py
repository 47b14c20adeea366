from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "apps.events"
