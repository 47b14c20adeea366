"""How webhook endpoints and deliveries look on the wire (docs/api/webhooks.md), and the
body sent to receivers; generated from their declarations in apps/webhooks/shapes.py."""

from __future__ import annotations

import json
from typing import Any

from apps.webhooks import shapes

endpoint_repr = shapes.ENDPOINT.encode
# `delivery.endpoint` should be loaded with it (select_related) in listings.
delivery_repr = shapes.DELIVERY.encode
attempt_repr = shapes.ATTEMPT.encode
# (delivery, attempts)
delivery_with_attempts_repr = shapes.DELIVERY_WITH_ATTEMPTS.encode
_body = shapes.WEBHOOK_BODY.encode
# (queued, more)
recovery_repr = shapes.RECOVERY.encode


def request_body(*, event_id: str, event_type: str, occurred_at: str, data: dict[str, Any]) -> str:
    """The body sent to receivers, as the text that is signed: compact, not ASCII-escaped."""
    return json.dumps(_body(event_id, event_type, occurred_at, data), separators=(",", ":"), ensure_ascii=False)
