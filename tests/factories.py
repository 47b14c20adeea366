"""Test data built through the real services, so tests exercise the one write path."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from apps.recordings import services as recordings
from apps.recordings.models import Session
from apps.recordings.services import SegmentInput
from apps.tenancy import services as tenancy
from apps.tenancy.models import Membership, Workspace

ALL_SCOPES = [
    "svc:sessions:read",
    "svc:transcripts:read",
    "svc:boards:read",
    "svc:webhooks:read",
    "svc:webhooks:write",
]
READ_SCOPES = ALL_SCOPES[:3]


def workspace(slug: str) -> Workspace:
    return tenancy.create_workspace(slug=slug, name=slug.title())


def member(ws: Workspace, email: str, password: str | None = None) -> Membership:
    return tenancy.add_member(workspace=ws, email=email, password=password)


def api_key(membership: Membership, scopes: list[str] | None = None) -> str:
    return tenancy.issue_api_key(membership=membership, scopes=scopes or READ_SCOPES, name="test").key


def segments(texts: list[str], speaker: str | None = "Speaker 1") -> list[SegmentInput]:
    return [
        SegmentInput(timestamp_start=i * 2000, timestamp_end=i * 2000 + 1800, text=t, speaker_label=speaker, confidence=0.9)
        for i, t in enumerate(texts)
    ]


def session(
    ws: Workspace,
    *,
    label: str | None = "Weekly sync",
    at: datetime | None = None,
    committed: list[str] | None = None,
    final: list[str] | None = None,
    completed: bool = False,
) -> Session:
    s = recordings.create_session(workspace=ws, label=label, memo=None, at=at)
    if committed:
        recordings.append_committed_segments(session=s, segments=segments(committed))
    if completed or final:
        s = recordings.change_session_status(session=s, status="completed")
    if final:
        recordings.write_final_transcript(session=s, segments=segments(final))
    return s


def sessions_at_distinct_times(ws: Workspace, count: int, start: datetime | None = None) -> list[Session]:
    start = start or datetime(2026, 1, 1, tzinfo=timezone.utc)
    return [session(ws, label=f"Session {i}", at=start + timedelta(minutes=i)) for i in range(count)]


def aged_event(ws: Workspace, type_: str, age: timedelta, session_id: str = "s1"):
    """An event recorded `age` ago: its id carries that time (retention reads the id's time)."""
    import os

    from apps.core.ids import crockford
    from apps.events.models import Event
    from apps.events.services import record_event

    recorded = datetime.now(timezone.utc) - age
    event = record_event(workspace_id=ws.id, type=type_, session_id=session_id, occurred_at=recorded,
                         data={"sessionId": session_id})
    ms = int(recorded.timestamp() * 1000)
    old_id = "evt_" + crockford((ms << 80) | (int.from_bytes(os.urandom(10), "big") >> 1))
    Event.objects.filter(pk=event.pk).update(id=old_id)
    event.id = old_id
    return event
