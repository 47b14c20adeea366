"""`Idempotency-Key`, Stripe's rules: a request sent again with the same key and the same body
is answered with the first answer (status and body, plus `Idempotent-Replayed: true`), not run
again; the same key with another request is `422 idempotency_key_reused`; while the first is
still running, a second is `409 conflict`. Keys are scoped to the credential and kept 24 hours.

The first request's work and the storing of its answer commit in one transaction, so a request
whose answer was lost on the way back is never run twice: the retry finds the answer. A 5xx or a
crash stores nothing (the claim is released, or expires after `STALE_AFTER`), so a retry runs
the request again. A 4xx is stored like any answer: the same request fails the same way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

import orjson
from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.access.principal import Principal
from apps.core.errors import Conflict, IdempotencyKeyReused
from apps.ingest.models import IdempotencyKey
from engine.postgresql import prepared

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
KEEP = timedelta(hours=24)
# A claim with no answer after this long belongs to a request that died: it is taken over.
STALE_AFTER = timedelta(seconds=max(60.0, 3 * settings.CONNECT_REQUEST_TIMEOUT_SECONDS))


@dataclass(frozen=True)
class Answer:
    """A stored answer, to send again."""

    status: int
    body: bytes


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What makes two requests "the same": method, path and the body as canonical JSON (so a
    retry that re-serialised the same object matches), or its bytes when it is not JSON."""
    try:
        canonical = orjson.dumps(orjson.loads(body), option=orjson.OPT_SORT_KEYS) if body else b""
    except orjson.JSONDecodeError:
        canonical = body
    digest = hashlib.sha256(f"{method}\n{path}\n".encode())
    digest.update(canonical)
    return digest.hexdigest()


def claim(*, principal: Principal, key: str, fingerprint: str) -> IdempotencyKey | Answer:
    """This request's claim on `key` (committed at once, so a concurrent duplicate sees it), or
    the answer to send again. Raises `IdempotencyKeyReused` or, while the first request is
    still running, `Conflict`."""
    for _ in range(3):
        now = timezone.now()
        claimed = _insert_claim(principal, key, fingerprint, now)
        if claimed is not None:
            return claimed
        row = IdempotencyKey.objects.filter(credential_id=principal.credential_id, key=key).first()
        if row is None:
            continue  # purged meanwhile
        expired = row.created_at < now - KEEP
        abandoned = row.status is None and row.created_at < now - STALE_AFTER
        if expired or abandoned:
            IdempotencyKey.objects.filter(pk=row.pk, created_at=row.created_at).delete()
            continue
        if row.fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                detail=f"{HEADER}: already used with a different request in the last 24 hours; "
                "send a new key for a new request"
            )
        if row.status is None:
            raise Conflict(detail=f"{HEADER}: a request with this key is still in progress; retry once it has finished")
        return Answer(row.status, bytes(row.body))
    raise Conflict(detail=f"{HEADER}: the key is contended; retry")


_TABLE = IdempotencyKey._meta.db_table
# One statement, outside any transaction (it commits on its own, as the claim must): a key
# already claimed inserts nothing and returns no row, where the ORM's `create` would need a
# transaction of its own to survive the unique violation (BEGIN, INSERT, COMMIT: three round
# trips and a compiled INSERT on every request). Prepared once per connection on PostgreSQL.
_CLAIM = (
    f"INSERT INTO {_TABLE} (workspace_id, credential_id, key, fingerprint, created_at) VALUES (%s, %s, %s, %s, %s)"
    " ON CONFLICT (credential_id, key) DO NOTHING RETURNING id"
)


def _insert_claim(principal: Principal, key: str, fingerprint: str, now) -> IdempotencyKey | None:
    """The new claim, or None when the credential's `key` is claimed already."""
    created_at = connection.ops.adapt_datetimefield_value(now)
    row = prepared.fetchone("connect_idempotency_claim", _CLAIM,
                            [principal.workspace.pk, principal.credential_id, key, fingerprint, created_at])
    if row is None:
        return None
    claimed = IdempotencyKey(id=row[0], workspace_id=principal.workspace.pk, credential_id=principal.credential_id,
                             key=key, fingerprint=fingerprint, created_at=now)
    claimed._state.adding, claimed._state.db = False, connection.alias
    return claimed


def store(claimed: IdempotencyKey, status: int, body: bytes) -> None:
    """The answer to `claimed`'s request; inside the request's own transaction when it wrote."""
    answered_at = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {_TABLE} SET status = %s, body = %s, answered_at = %s WHERE id = %s",
                       [status, body, answered_at, claimed.pk])


def release(claimed: IdempotencyKey) -> None:
    """The request failed without an answer worth repeating (a 5xx): a retry runs it again."""
    IdempotencyKey.objects.filter(pk=claimed.pk, status__isnull=True).delete()


def purge_expired() -> int:
    """Deletes keys older than `KEEP`; run hourly (apps/ingest/apps.py)."""
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - KEEP).delete()
    return deleted
