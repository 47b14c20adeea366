"""A Connect webhook receiver as a Django view. In urls.py:
`path("hooks/connect", django_receiver.connect_webhook)`."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from connect_client import Event, WebhookVerificationError, webhooks

JWKS_URL = "https://connect.example.com/.well-known/webhook-signing-keys.json"


def handle(event: Event) -> None:
    print(event.id, event.type, event.session_id, flush=True)  # e.g. enqueue a task


@csrf_exempt
@require_POST
def connect_webhook(request: HttpRequest) -> HttpResponse:
    try:
        event = webhooks.verify(request.headers, request.body, jwks_url=JWKS_URL)
    except WebhookVerificationError:
        return HttpResponseBadRequest()
    handle(event)  # deduplicate on event.id if handling twice matters
    return HttpResponse(status=204)
