from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "apps.tenancy"

    def ready(self) -> None:
        from apps.tenancy import openapi  # noqa: F401  registers the security scheme
