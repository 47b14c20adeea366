from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "apps.events"

    def ready(self) -> None:
        from django_q.models import Schedule

        from apps.core.periodic import keep_schedule

        # Outbox retention, hourly, whether or not anyone streams.
        keep_schedule(self, "connect.events.purge", "apps.events.services.purge_events", Schedule.HOURLY)
