"""Writes to a session's own row: creation, status transitions and field changes, each with the
event the contract gives it, and `lock_session`, which every writer of a session's transcripts
and boards takes first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.timestamps import iso_ms
from apps.events import filters
from apps.events.models import EventType
from apps.events.services import record_event, record_internal_event
from apps.recordings.models import Session, SessionStatus
from apps.recordings.representations import session_created_data, session_status_changed_data
from apps.tenancy.models import Workspace

# docs/api/sessions.md: recording→processing→completed, recording→completed, recording/processing→failed.
STATUS_TRANSITIONS: dict[str, set[str]] = {
    SessionStatus.RECORDING: {SessionStatus.PROCESSING, SessionStatus.COMPLETED, SessionStatus.FAILED},
    SessionStatus.PROCESSING: {SessionStatus.COMPLETED, SessionStatus.FAILED},
    SessionStatus.COMPLETED: set(),
    SessionStatus.FAILED: set(),
}

SESSION_FIELDS = ("label", "memo", "started_at", "ended_at")


class InvalidTransition(ValueError):
    pass


class InvalidTimes(ValueError):
    """A session would end before it started."""


def lock_session(session: Session) -> Session:
    """Serialise writers of one session's transcripts and boards: they read the last sequence
    or version and write the next, which two concurrent writers would otherwise both take."""
    return Session.objects.select_for_update().get(pk=session.pk)


@transaction.atomic
def create_session(
    *,
    workspace: Workspace,
    label: str | None = None,
    memo: str | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    external_id: str | None = None,
    at: datetime | None = None,
) -> Session:
    now = at or timezone.now()
    if ended_at is not None and ended_at < (started_at or now):
        raise InvalidTimes("endedAt is before startedAt")
    session = Session.objects.create(
        workspace=workspace,
        label=label,
        memo=memo,
        status=SessionStatus.RECORDING,
        started_at=started_at or now,
        ended_at=ended_at,
        external_id=external_id,
        created_at=now,
        updated_at=now,
    )
    record_event(
        workspace_id=session.workspace_id,
        type=EventType.SESSION_CREATED,
        session_id=session.id,
        occurred_at=now,
        data=session_created_data(session, now),
    )
    return session


@transaction.atomic
def change_session_status(*, session: Session, status: str, at: datetime | None = None) -> Session:
    session = lock_session(session)
    if status not in STATUS_TRANSITIONS.get(session.status, set()):
        raise InvalidTransition(f"{session.status} → {status} is not a session transition")
    now = at or timezone.now()
    if session.status == SessionStatus.RECORDING:
        session.ended_at = now
    previous_status = session.status
    session.status = status
    session.updated_at = now
    session.save(update_fields=["status", "ended_at", "updated_at"])
    record_event(
        workspace_id=session.workspace_id,
        type=EventType.SESSION_STATUS_CHANGED,
        session_id=session.id,
        occurred_at=now,
        data=session_status_changed_data(session, previous_status, now),
    )
    return session


@transaction.atomic
def update_session(*, session: Session, at: datetime | None = None, **changes: Any) -> Session:
    """Set any of `SESSION_FIELDS` (None clears); `updated_at` moves only when a value changes.
    No public event (the contract has none for a session's fields): the internal
    `session.updated`, for live resources of the session."""
    unknown = set(changes) - set(SESSION_FIELDS)
    if unknown:
        raise TypeError(f"not a session field: {', '.join(sorted(unknown))}")
    session = lock_session(session)
    changed = [name for name, value in changes.items() if getattr(session, name) != value]
    if not changed:
        return session
    for name in changed:
        setattr(session, name, changes[name])
    if session.ended_at is not None and session.started_at is not None and session.ended_at < session.started_at:
        raise InvalidTimes("endedAt is before startedAt")
    session.updated_at = at or timezone.now()
    session.save(update_fields=[*changed, "updated_at"])
    record_internal_event(
        workspace_id=session.workspace_id, type=filters.SESSION_UPDATED, session_id=session.id,
        occurred_at=session.updated_at, data={"sessionId": session.id, "fields": changed,
                                              "occurredAt": iso_ms(session.updated_at)},
    )
    return session


@transaction.atomic
def put_external_session(
    *, workspace: Workspace, external_id: str, at: datetime | None = None, **changes: Any
) -> tuple[Session, bool]:
    """The session the producer calls `external_id`, created (recording, `session.created`)
    or updated with `changes` (any of `SESSION_FIELDS`); True when created. Two producers
    creating the same id at once make one session: the loser of the unique constraint updates."""
    session = Session.objects.filter(workspace=workspace, external_id=external_id).first()
    if session is None:
        try:
            with transaction.atomic():
                return create_session(workspace=workspace, external_id=external_id, at=at, **changes), True
        except IntegrityError:
            session = Session.objects.get(workspace=workspace, external_id=external_id)
    return update_session(session=session, at=at, **changes), False


@transaction.atomic
def set_session_status(*, session: Session, status: str, at: datetime | None = None) -> tuple[Session, bool]:
    """`change_session_status`, where asking for the status the session already has is no
    change (a producer's retry), not an impossible transition; True when it changed."""
    session = lock_session(session)
    if session.status == status:
        return session, False
    return change_session_status(session=session, status=status, at=at), True
