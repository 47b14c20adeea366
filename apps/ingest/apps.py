from django.apps import AppConfig


class IngestConfig(AppConfig):
    """Data in: the write door recorders use (the ingest API) and the history importer. Every
    write goes through apps.recordings' services, so events fire as for any other producer."""

    name = "apps.ingest"

    def ready(self) -> None:
        from django_q.models import Schedule

        from apps.core.periodic import keep_schedule

        # Idempotency keys are kept 24 hours; the hourly purge keeps the table that small.
        keep_schedule(self, "connect.ingest.purge_idempotency_keys", "apps.ingest.tasks.purge_idempotency_keys",
                      Schedule.HOURLY)
