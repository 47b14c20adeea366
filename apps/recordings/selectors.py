"""Reads of recordings. Every function takes `workspace=`: a row of another workspace is
indistinguishable from a missing one (`NotFound`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from django.db.models import Q, QuerySet

from apps.core.cursors import InvalidCursor, decode_cursor, encode_cursor
from apps.core.errors import NotFound
from apps.core.timestamps import parse_iso
from apps.recordings.models import BoardContent, RevisionKind, Segment, Session, Transcript
from apps.recordings.representations import SESSION_FIELDS
from apps.tenancy.models import Workspace


def get_session(*, workspace: Workspace, session_id: str) -> Session:
    try:
        return Session.objects.get(workspace=workspace, id=session_id)
    except Session.DoesNotExist:
        raise NotFound() from None


def sessions_page(
    *,
    workspace: Workspace,
    limit: int,
    cursor: str | None = None,
    statuses: list[str] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> tuple[list[Any], str | None]:
    """Newest first, keyset-paginated on (created_at, id). Items are named rows of
    SESSION_FIELDS (the hot listing skips model instances); session_repr takes them.
    Filters: `statuses` (any of), `created_after` < createdAt < `created_before` (both
    exclusive); the cursor is bound to them (a cursor sent with other filters is 400)."""
    sessions = Session.objects.filter(workspace=workspace)
    if statuses:
        statuses = sorted(set(statuses))
        sessions = sessions.filter(status__in=statuses)
    # Compared as the wire shows createdAt, in whole milliseconds: `createdAfter=<a session's
    # createdAt>` never returns that session again, though it is stored in microseconds.
    if created_after is not None:
        sessions = sessions.filter(created_at__gte=_floor_ms(created_after) + timedelta(milliseconds=1))
    if created_before is not None:
        ceiling = _floor_ms(created_before)
        if ceiling != created_before:
            ceiling += timedelta(milliseconds=1)
        sessions = sessions.filter(created_at__lt=ceiling)
    # Bound as the instant in UTC microseconds: `…Z` and `…+00:00` are the same filter.
    filters = {
        "status": statuses or None,
        "createdAfter": _instant(created_after),
        "createdBefore": _instant(created_before),
    }
    if cursor:
        key = decode_cursor("sessions", workspace.id, cursor, filters)
        try:
            created_at, last_id = parse_iso(key[0]), str(key[1])
        except (IndexError, TypeError, ValueError):
            raise InvalidCursor() from None
        sessions = sessions.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=last_id))
    page = list(sessions.order_by("-created_at", "-id").values_list(*SESSION_FIELDS, named=True)[: limit + 1])
    if len(page) <= limit:
        return page, None
    page = page[:limit]
    last = page[-1]
    # Microseconds, not the wire's milliseconds: the key must be exact for the keyset to hold.
    return page, encode_cursor("sessions", workspace.id, [last.created_at.isoformat(), last.id], filters)


def _floor_ms(value: datetime) -> datetime:
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(timezone.utc).isoformat()


def transcript_revisions(
    *, workspace: Workspace, session_id: str, revision_kind: str | None = None
) -> list[tuple[Transcript, list[Segment]]]:
    session = get_session(workspace=workspace, session_id=session_id)
    transcripts = Transcript.objects.filter(session=session).order_by("revision_kind")
    if revision_kind:
        transcripts = transcripts.filter(revision_kind=revision_kind)
    return [(t, list(ordered_segments(t))) for t in transcripts]


def ordered_segments(transcript: Transcript) -> QuerySet[Segment]:
    """Committed segments follow the session's commit order; final ones their sequence."""
    order = "session_committed_index" if transcript.revision_kind == RevisionKind.COMMITTED else "sequence"
    return Segment.objects.filter(transcript=transcript).order_by(order, "sequence")


def flat_transcript(*, workspace: Workspace, session_id: str) -> list[Segment]:
    """The final revision's segments when there is one, else the committed revision's."""
    session = get_session(workspace=workspace, session_id=session_id)
    by_kind = {t.revision_kind: t for t in Transcript.objects.filter(session=session)}
    transcript = by_kind.get(RevisionKind.FINAL) or by_kind.get(RevisionKind.COMMITTED)
    return list(ordered_segments(transcript)) if transcript else []


def session_boards(*, workspace: Workspace, session_id: str, with_payload: bool = False) -> list[BoardContent]:
    """Every version, grouped by board, newest version first. The REST list shows summaries,
    so the payload is left in the database unless asked for (MCP's list_boards shows it)."""
    session = get_session(workspace=workspace, session_id=session_id)
    boards = BoardContent.objects.filter(session=session).order_by("board_id", "-version")
    return list(boards if with_payload else boards.defer("payload"))


def current_board(*, workspace: Workspace, session_id: str, board_id: str) -> BoardContent:
    session = get_session(workspace=workspace, session_id=session_id)
    try:
        return BoardContent.objects.get(session=session, board_id=board_id, is_current=True)
    except BoardContent.DoesNotExist:
        raise NotFound() from None


