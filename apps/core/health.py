"""Operational endpoints for load balancers and newcomers: unauthenticated, never rate limited
(no Bearer credential is read), JSON.

- `GET /healthz`: liveness. The process answers; touches nothing else, so a database outage
  does not make a load balancer restart healthy processes.
- `GET /readyz`: readiness. The database answers `SELECT 1` and, when `REDIS_URL` is set,
  Redis answers PING, each within `READINESS_TIMEOUT_SECONDS`; else 503 with `Retry-After`
  and, per dependency, what failed. Both are served on their own lane, never shed under
  overload (engine/lanes.py).
- `GET /`: a small index of links (docs, OpenAPI, health, OAuth metadata).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_safe

from apps.core.redis_clients import redis_client

logger = logging.getLogger("connect.health")

READINESS_TIMEOUT_SECONDS = 2  # the database probe's; Redis answers within redis_clients' own
READINESS_RETRY_AFTER_SECONDS = 5


def database_ready() -> None:
    if connection.vendor == "postgresql":
        # A fresh connection with a short connect timeout, not one from the pool: the pool
        # waits up to its own timeout (10 s) for a connection, longer than a probe should.
        import psycopg

        params = connection.get_connection_params()
        with psycopg.connect(**params, connect_timeout=READINESS_TIMEOUT_SECONDS) as conn:
            conn.execute("SELECT 1")
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def redis_ready() -> None:
    # The process's own client: its timeouts are as short as a probe's, and a probe then also
    # sees what the requests see.
    redis_client().ping()


@require_safe
def healthz(request) -> JsonResponse:  # noqa: ARG001
    return JsonResponse({"status": "ok"})


@require_safe
def readyz(request) -> JsonResponse:  # noqa: ARG001
    checks = {"database": database_ready}
    if settings.REDIS_URL:
        checks["redis"] = redis_ready
    results = {}
    for name, check in checks.items():
        try:
            check()
            results[name] = "ok"
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            logger.warning("readiness check %s failed: %s", name, exc)
            results[name] = "unavailable"
    if all(value == "ok" for value in results.values()):
        return JsonResponse({"status": "ready", "checks": results})
    response = JsonResponse({"error": "not_ready", "checks": results}, status=503)
    response["Retry-After"] = str(READINESS_RETRY_AFTER_SECONDS)
    return response


@require_safe
def index(request) -> JsonResponse:  # noqa: ARG001
    base = settings.CONNECT_BASE_URL
    return JsonResponse(
        {
            "name": "Connect",
            "links": {
                "docs": f"{base}/docs",
                "openapi": f"{base}/openapi.json",
                "api": f"{base}/api/v1/sessions",
                "sessions": f"{base}/api/v1/sessions",
                "search": f"{base}/api/v1/transcripts/search",
                "events": f"{base}/api/v1/events",
                "eventStream": f"{base}/api/v1/events/stream",
                "mcp": f"{base}/mcp",
                "webhooks": f"{base}/api/v1/webhooks",
                "webhookDeliveries": f"{base}/api/v1/webhook-deliveries",
                "webhookSigningKeys": f"{base}/.well-known/webhook-signing-keys.json",
                "protectedResourceMetadata": f"{base}/.well-known/oauth-protected-resource",
                "authorizationServerMetadata": f"{settings.CONNECT_AUTH_URL}/.well-known/oauth-authorization-server",
                "health": f"{base}/healthz",
                "readiness": f"{base}/readyz",
                "admin": f"{base}/admin/",
            },
        }
    )
