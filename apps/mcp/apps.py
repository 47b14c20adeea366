from django.apps import AppConfig


class McpConfig(AppConfig):
    name = "apps.mcp"
    label = "mcp"

    def ready(self) -> None:
        from django_q.models import Schedule

        from apps.core.openapi import SCHEMA_EXTENDERS
        from apps.core.periodic import keep_schedule
        from apps.events.signals import event_recorded
        from apps.mcp import events_delivery, events_webhooks
        from apps.mcp.openapi import extend

        SCHEMA_EXTENDERS.append(extend)
        # The Events extension's webhook subscriptions: their methods, their door to the drains
        # (headers, final answers, the watermark cursor, suspension, the sweep's upkeep: catch-ups
        # and terminations), deliveries for recorded events, and the end of those past their grant.
        events_webhooks.register()
        events_delivery.register(upkeep=events_webhooks.upkeep)
        event_recorded.connect(events_delivery.on_event_recorded, dispatch_uid="mcp.events_webhooks")
        keep_schedule(self, "connect.mcp.expire_event_subscriptions",
                      "apps.mcp.events_webhooks.expire_subscriptions", Schedule.MINUTES, minutes=1)
