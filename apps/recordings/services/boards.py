"""Writes to boards: every publication adds a version and makes it the current one; a
producer's `put_board` adds none when the current version already says the same."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

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
    """Add the next version of a board and make it the current one."""
    now = at or timezone.now()
    lock_session(session)
    versions = BoardContent.objects.filter(session=session, board_id=board_id)
    last = versions.aggregate(v=Max("version"))["v"] or 0
    versions.filter(is_current=True).update(is_current=False)
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
