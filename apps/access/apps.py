from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "apps.access"
    label = "access"

    def ready(self) -> None:
        from apps.access import openapi  # noqa: F401  registers the security scheme
