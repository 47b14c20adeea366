"""Standard Webhooks signatures, as pure functions over bytes (an endpoint's opt-in beside the
contract's Svc-* headers, which every delivery keeps).

The Standard Webhooks specification (github.com/standard-webhooks/standard-webhooks,
spec/standard-webhooks.md, "Signature scheme" and "Webhook headers"): the symmetric scheme
`v1` is HMAC-SHA256 over `{msg_id}.{timestamp}.{payload}`, sent base64-encoded as `v1,<sig>`
in `webhook-signature`; several signatures are space-separated, which is how an old and a
new secret both sign during a rotation. Secrets are random, 24 to 64 bytes, shown base64 with
the `whsec_` prefix. `webhook-id` is the event id: the same across retries and replays, the
receiver's idempotency key, and it has no `.` in it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Iterable

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # the spec asks for 24 to 64


def new_secret() -> bytes:
    return os.urandom(SECRET_BYTES)


def serialize(secret: bytes) -> str:
    """The secret as receivers configure it in a Standard Webhooks library."""
    return SECRET_PREFIX + base64.b64encode(secret).decode("ascii")


def signature(secret: bytes, *, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode("ascii") + body
    return "v1," + base64.b64encode(hmac.new(secret, signed, hashlib.sha256).digest()).decode("ascii")


def headers(secrets: Iterable[bytes], *, msg_id: str, timestamp: int, body: bytes) -> list[tuple[str, str]]:
    """`webhook-id`, `webhook-timestamp` and `webhook-signature` with one signature per secret,
    the current one first."""
    signatures = " ".join(signature(s, msg_id=msg_id, timestamp=timestamp, body=body) for s in secrets)
    return [("webhook-id", msg_id), ("webhook-timestamp", str(timestamp)), ("webhook-signature", signatures)]
