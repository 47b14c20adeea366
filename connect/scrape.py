"""`/metrics`: the Prometheus exposition of every process of this `serve` (apps/core/metrics.py).
Project level, beside connect/wellknown.py: it reads the webhooks app (the due-deliveries gauge),
which the ground floor may not import.

It answers only when CONNECT_METRICS_TOKEN is set (404 otherwise) and the scrape carries it as
a Bearer token (401 otherwise; compared in constant time). It is no API path: no rate limit, and
on the probe lane (engine/lanes.py), so a saturated process still answers it.
"""

from __future__ import annotations

import hmac
import os

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from apps.core.errors import NotFound, Unauthorized, error_response
from apps.webhooks.delivery import due_count

# The due-deliveries gauge counts at most this many rows: "is the queue behind, and roughly by
# how much", read from the index at each scrape without counting a million-row backlog.
DUE_CAP = 10_000


class DueDeliveries:
    """Collected at scrape time: webhook deliveries due now (capped at DUE_CAP)."""

    def collect(self):

        yield GaugeMetricFamily(
            "connect_webhook_deliveries_due",
            f"Webhook deliveries due for an attempt now (counted up to {DUE_CAP}).",
            value=due_count(limit=DUE_CAP),
        )


def exposition() -> bytes:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        from prometheus_client import REGISTRY as registry
    # A registry of the scrape's own for the database gauge, registered nowhere else.
    due = CollectorRegistry()
    due.register(DueDeliveries())
    return generate_latest(registry) + generate_latest(due)


def scrape_allowed(authorization: str | None, token: str) -> bool:
    scheme, _, presented = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())


@require_safe
def metrics_view(request) -> HttpResponse:
    token = settings.CONNECT_METRICS_TOKEN
    if not token:
        return error_response(NotFound())
    if not scrape_allowed(request.META.get("HTTP_AUTHORIZATION"), token):
        response = error_response(Unauthorized())
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    response = HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
