from django.apps import AppConfig


class OAuthConfig(AppConfig):
    name = "apps.oauth"
    label = "oauth"

    def ready(self) -> None:
        from apps.core.openapi import SCHEMA_EXTENDERS
        from apps.oauth.openapi import extend

        SCHEMA_EXTENDERS.append(extend)
