"""The ingest app's periodic work, scheduled in apps.py."""

from __future__ import annotations

from apps.ingest.idempotency import purge_expired


def purge_idempotency_keys() -> int:
    return purge_expired()
