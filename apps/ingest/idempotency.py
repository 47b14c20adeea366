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
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.access.principal import Principal
from apps.core.errors import Conflict, IdempotencyKeyReused
from apps.ingest.models import IdempotencyKey

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
        try:
            return _create(principal, key, fingerprint, now)
        except IntegrityError:
            pass
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


def _create(principal: Principal, key: str, fingerprint: str, now) -> IdempotencyKey:
    """The claim's row, committed by its INSERT alone: a request claims outside any transaction
    (autocommit), where a unique violation aborts nothing, so it needs no transaction of its own
    (BEGIN and COMMIT: two more round trips on every request). Called inside one (a test's, a
    caller's), a savepoint keeps a violation from aborting it."""
    def create() -> IdempotencyKey:
        return IdempotencyKey.objects.create(workspace_id=principal.workspace.pk, credential_id=principal.credential_id,
                                             key=key, fingerprint=fingerprint, created_at=now)

    if not transaction.get_connection().in_atomic_block:
        return create()
    with transaction.atomic():
        return create()


def store(claimed: IdempotencyKey, status: int, body: bytes) -> None:
    """The answer to `claimed`'s request; inside the request's own transaction when it wrote."""
    IdempotencyKey.objects.filter(pk=claimed.pk).update(status=status, body=body, answered_at=timezone.now())


def release(claimed: IdempotencyKey) -> None:
    """The request failed without an answer worth repeating (a 5xx): a retry runs it again."""
    IdempotencyKey.objects.filter(pk=claimed.pk, status__isnull=True).delete()


def purge_expired() -> int:
    """Deletes keys older than `KEEP`; run hourly (apps/ingest/apps.py)."""
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - KEEP).delete()
    return deleted
