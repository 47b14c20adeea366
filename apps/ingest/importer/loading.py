"""Loading checked records into a workspace: idempotent, resumable, quiet by default.

Invariants:
- each session is written in one transaction, so an interrupted run leaves whole sessions only,
  and a re-run continues where it stopped;
- a session whose external id the workspace already holds is never written again: it is
  skipped when what is stored equals the record, and refused (left unchanged) when it differs;
- by default the rows are written with the recordings bulk loader, which records no events:
  history is not replayed into streams and webhooks. With `emit_events` each session goes
  through the recordings services one change at a time, so its events are recorded as a live
  producer's would be (their times are the historic ones)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timezone
from itertools import islice

from django.db import IntegrityError, transaction

from apps.ingest.importer.records import Refused, SessionRecord
from apps.ingest.importer.sources import Item
from apps.recordings import services
from apps.recordings.models import BoardContent, RevisionKind, Segment, Session, SessionStatus, Transcript
from apps.recordings.services import ImportedSession
from apps.tenancy.models import Workspace

CHUNK = 50  # records looked up together (one query for the external ids already present)


@dataclass
class Summary:
    imported: int = 0
    segments: int = 0
    skipped: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)  # (FILE:LINE, why)

    def line(self) -> str:
        return (
            f"imported {self.imported:,} sessions ({self.segments:,} segments), "
            f"skipped {self.skipped:,} already present, refused {len(self.refused):,}"
        )


def load(
    *,
    workspace: Workspace,
    items: Iterable[Item],
    emit_events: bool = False,
    progress: Callable[[int, Summary], None] | None = None,
) -> Summary:
    """Load `items` in their order, in this process; `progress(bytes read, summary)` after each."""
    summary = Summary()
    for chunk in _chunks(items, CHUNK):
        load_chunk(workspace, chunk, summary, emit_events=emit_events, progress=progress)
    if summary.imported:
        services.refresh_statistics()
    return summary


def load_chunk(
    workspace: Workspace,
    chunk: list[Item],
    summary: Summary,
    *,
    emit_events: bool,
    progress: Callable[[int, Summary], None] | None = None,
) -> None:
    """Load one chunk of items in order into `summary`, one transaction per session."""
    write = _write_with_events if emit_events else _write_bulk
    ids = [i.record.external_id for i in chunk if isinstance(i.record, SessionRecord)]
    present = _stored_shapes(workspace, ids)
    for item in chunk:
        record = item.record
        if isinstance(record, Refused):
            summary.refused.append((item.where, str(record)))
        elif record.external_id in present:
            _compare(summary, item, present[record.external_id])
        else:
            try:
                write(workspace, record)
            except IntegrityError:
                # Written meanwhile: earlier in this chunk, or by another importer.
                stored = _stored_shapes(workspace, [record.external_id]).get(record.external_id)
                if stored is None:
                    raise
                _compare(summary, item, stored)
            else:
                summary.imported += 1
                summary.segments += record.segment_count
        if progress:
            progress(item.size, summary)


def _compare(summary: Summary, item: Item, stored: tuple) -> None:
    if _shape(item.record.session) == stored:
        summary.skipped += 1
    else:
        summary.refused.append((
            item.where,
            f"externalId {item.record.external_id!r} is already in the workspace with other content; "
            "left unchanged (delete that session to load this one)",
        ))  # fmt: skip


def _write_bulk(workspace: Workspace, record: SessionRecord) -> None:
    services.import_sessions(workspace=workspace, sessions=[record.session])


@transaction.atomic
def _write_with_events(workspace: Workspace, record: SessionRecord) -> None:
    """The session's life replayed through the services, each change at its historic time."""
    s = record.session
    session = services.create_session(
        workspace=workspace, label=s.label, memo=s.memo, started_at=s.started_at, at=s.created_at
    )
    # create_session takes no external id, and dates an unknown start at creation.
    Session.objects.filter(pk=session.pk).update(external_id=record.external_id, started_at=s.started_at)
    for at, segments in s.committed:
        services.append_committed_segments(session=session, segments=segments, at=at)
    if s.status != SessionStatus.RECORDING:
        services.change_session_status(session=session, status=s.status, at=s.ended_at)
    if s.final is not None:
        services.write_final_transcript(session=session, segments=s.final, at=s.final_at)
    for board in s.boards or []:
        services.publish_board(
            session=session, board_id=board.board_id, payload=board.payload,
            source_revision_kind=board.source_revision_kind, status=board.status, at=board.created_at,
        )  # fmt: skip


# --- comparing a record with what is stored ----------------------------------------------------


def _shape(s: ImportedSession) -> tuple:
    """What the importer writes of a session and reads back unchanged, the same from a record
    and from the rows (`_stored_shapes`). Derived values (ids, numbering, updated_at, the
    committed segments' creation times) are left out."""
    committed = [seg for _, chunk in s.committed for seg in chunk]
    boards = sorted(s.boards or [], key=lambda b: b.board_id)  # stable: versions keep their order
    return (
        s.label, s.memo, s.status, _utc(s.started_at), _utc(s.ended_at), _utc(s.created_at),
        [(g.timestamp_start, g.timestamp_end, g.speaker_label, g.text, g.confidence) for g in committed] or None,
        None if s.final is None else [(g.timestamp_start, g.timestamp_end, g.speaker_label, g.text, g.confidence)
                                      for g in s.final],
        [(b.board_id, b.status, b.source_revision_kind, services.payload_hash(b.payload), _utc(b.created_at))
         for b in boards],
    )  # fmt: skip


def _stored_shapes(workspace: Workspace, external_ids: list[str]) -> dict[str, tuple]:
    """external id → `_shape` of the stored session, for those of `external_ids` present."""
    if not external_ids:
        return {}
    sessions = {
        row[0]: row[1:]
        for row in Session.objects.filter(workspace=workspace, external_id__in=external_ids).values_list(
            "id", "external_id", "label", "memo", "status", "started_at", "ended_at", "created_at"
        )
    }
    if not sessions:
        return {}
    revisions: dict[str, dict[str, list]] = {sid: {} for sid in sessions}
    kinds = {}
    transcripts = Transcript.objects.filter(session_id__in=sessions)
    for tid, sid, kind in transcripts.values_list("id", "session_id", "revision_kind"):
        revisions[sid][kind] = []
        kinds[tid] = revisions[sid][kind]
    segments = Segment.objects.filter(transcript_id__in=kinds).order_by("transcript_id", "sequence")
    for tid, *fields in segments.values_list(
        "transcript_id", "timestamp_start", "timestamp_end", "speaker_label", "text", "confidence"
    ):
        kinds[tid].append(tuple(fields))
    boards: dict[str, list] = {sid: [] for sid in sessions}
    for sid, *fields, created_at in (
        BoardContent.objects.filter(session_id__in=sessions)
        .order_by("session_id", "board_id", "version")
        .values_list("session_id", "board_id", "status", "source_revision_kind", "payload_hash", "created_at")
    ):
        boards[sid].append((*fields, _utc(created_at)))
    return {
        external_id: (
            label, memo, status, _utc(started), _utc(ended), _utc(created),
            revisions[sid].get(RevisionKind.COMMITTED) or None, revisions[sid].get(RevisionKind.FINAL), boards[sid],
        )  # fmt: skip
        for sid, (external_id, label, memo, status, started, ended, created) in sessions.items()
    }


def _utc(value):
    return None if value is None else value.astimezone(timezone.utc)


def _chunks(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk
