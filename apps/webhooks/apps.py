from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "apps.webhooks"

    def ready(self) -> None:
        from django_q.models import Schedule

        from apps.core.openapi import SCHEMA_EXTENDERS
        from apps.core.periodic import keep_schedule
        from apps.webhooks import openapi, receivers

        if openapi.extend not in SCHEMA_EXTENDERS:
            SCHEMA_EXTENDERS.append(openapi.extend)
        receivers.connect()
        # The sweeper every minute (a backstop for `qcluster`-only deployments; `serve` also
        # sweeps every CONNECT_WEBHOOK_SWEEP_SECONDS) and the daily purge of expired deliveries.
        keep_schedule(self, "connect.webhooks.sweep", "apps.webhooks.tasks.sweep", Schedule.MINUTES, minutes=1)
        keep_schedule(self, "connect.webhooks.purge", "apps.webhooks.tasks.purge", Schedule.DAILY)
