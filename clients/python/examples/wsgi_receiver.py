"""A Connect webhook receiver as a plain WSGI app (any WSGI server: gunicorn, waitress, wsgiref).

    gunicorn wsgi_receiver:app
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from connect_client import Event, WebhookVerificationError, webhooks

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

JWKS_URL = "https://connect.example.com/.well-known/webhook-signing-keys.json"
seen: set[str] = set()  # event ids handled; use a table with a unique key in production


def handle(event: Event) -> None:
    print(event.id, event.type, event.session_id, flush=True)  # keep it quick: queue long work


def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    raw_body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    headers = {"Svc-Signature": environ.get("HTTP_SVC_SIGNATURE", "")}
    try:
        event = webhooks.verify(headers, raw_body, jwks_url=JWKS_URL)
    except WebhookVerificationError:
        start_response("400 Bad Request", [("Content-Length", "0")])
        return [b""]
    if event.id is not None and event.id not in seen:  # delivery is at least once
        seen.add(event.id)
        handle(event)
    start_response("204 No Content", [])
    return [b""]
