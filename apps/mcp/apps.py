from django.apps import AppConfig


class McpConfig(AppConfig):
    name = "apps.mcp"
    label = "mcp"

    def ready(self) -> None:
        from apps.core.openapi import SCHEMA_EXTENDERS
        from apps.mcp.openapi import extend

        SCHEMA_EXTENDERS.append(extend)
