"""Writes to boards: every publication adds a version and makes it the current one, recording
the internal `board.version.created` (live resources of the board hear of it); a producer's
`put_board` adds none when the current version already says the same."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from apps.core.timestamps import iso_ms
from apps.events import filters
from apps.events.services import record_internal_event
from apps.recordings.models import BoardContent, BoardStatus, Session
from apps.recordings.services.sessions import lock_session


def payload_hash(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@transaction.atomic
def publish_board(
    *,
    session: Session,
    board_id: str,
    payload: Any,
    source_revision_kind: str,
    status: str = BoardStatus.READY,
    at: datetime | None = None,
) -> BoardContent:
    """Add the next version of a board and make it the current one. Its event names the
    version made and the one that stopped being current (its `isCurrent` changed)."""
    now = at or timezone.now()
    lock_session(session)
    versions = BoardContent.objects.filter(session=session, board_id=board_id)
    found = versions.aggregate(last=Max("version"), current=Max("version", filter=Q(is_current=True)))
    last = found["last"] or 0
    versions.filter(is_current=True).update(is_current=False)
    record_internal_event(
        workspace_id=session.workspace_id, type=filters.BOARD_VERSION_CREATED, session_id=session.id,
        occurred_at=now, data={"sessionId": session.id, "boardId": board_id, "version": last + 1,
                               "previousVersion": found["current"], "occurredAt": iso_ms(now)},
    )
    return BoardContent.objects.create(
        workspace_id=session.workspace_id,
        session=session,
        board_id=board_id,
        version=last + 1,
        status=status,
        is_current=True,
        source_revision_kind=source_revision_kind,
        payload=payload,
        payload_hash=payload_hash(payload),
        created_at=now,
    )


@transaction.atomic
def put_board(
    *,
    session: Session,
    board_id: str,
    payload: Any,
    source_revision_kind: str,
    status: str,
    at: datetime | None = None,
) -> tuple[BoardContent, bool]:
    """`publish_board`, unless the current version already says the same (status, source
    revision kind and payload hash): then it is returned as it is, so a producer's retry adds no
    version. True when a version was added."""
    lock_session(session)
    current = BoardContent.objects.filter(session=session, board_id=board_id, is_current=True).first()
    if (
        current is not None
        and current.status == status
        and current.source_revision_kind == source_revision_kind
        and current.payload_hash == payload_hash(payload)
    ):
        return current, False
    board = publish_board(
        session=session, board_id=board_id, payload=payload, source_revision_kind=source_revision_kind,
        status=status, at=at,
    )
    return board, True
