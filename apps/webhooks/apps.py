from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "apps.webhooks"

    def ready(self) -> None:
        from apps.core.openapi import SCHEMA_EXTENDERS
        from apps.webhooks import openapi, receivers

        if openapi.extend not in SCHEMA_EXTENDERS:
            SCHEMA_EXTENDERS.append(openapi.extend)
        receivers.connect()
