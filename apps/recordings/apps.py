from django.apps import AppConfig


class RecordingsConfig(AppConfig):
    name = "apps.recordings"

    def ready(self) -> None:
        from django_q.models import Schedule

        from apps.core.periodic import keep_schedule

        keep_schedule(
            self, "connect.recordings.compact_search_index", "apps.recordings.services.compact_search_index",
            Schedule.HOURLY,
        )  # fmt: skip
