"""The public signing-key set (contract §4.6): no credential, cacheable for a short while.
Receivers refresh on an unknown kid, so a rotation is picked up within the cache lifetime."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from apps.webhooks import keys

JWKS_MAX_AGE_SECONDS = 300


@require_GET
def signing_keys_view(request) -> JsonResponse:  # noqa: ARG001
    response = JsonResponse(keys.jwks())
    response["Cache-Control"] = f"public, max-age={JWKS_MAX_AGE_SECONDS}"
    return response
