from django.apps import AppConfig


class StreamConfig(AppConfig):
    name = "apps.stream"

    def ready(self) -> None:
        from apps.core.openapi import SCHEMA_EXTENDERS
        from apps.stream import openapi

        if openapi.extend not in SCHEMA_EXTENDERS:
            SCHEMA_EXTENDERS.append(openapi.extend)
