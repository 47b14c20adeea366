"""`simulate_activity SLUG [--sessions N] [--interval S] [--segments M] [--via-api [--base-url URL]]`
(README.md, Operator commands).

A live producer, so every step records its events (and webhooks fire): per session, create it,
append M committed segments S seconds apart, move it to processing, write the final transcript,
publish the boards, and complete it. By default through the services; with `--via-api`, as a
recorder would, over HTTP through the ingest API (`--base-url`, default CONNECT_BASE_URL) with an
ingest key it issues for itself (`--ingest-key` to bring one). Prints progress and exits by itself."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.recordings import services as recordings
from apps.recordings.models import RevisionKind, SessionStatus
from apps.recordings.services import SegmentInput
from apps.tenancy import services as tenancy
from apps.tenancy.models import Membership, Workspace

LINES = [
    ("Speaker 1", "Let's start with the roadmap for next quarter."),
    ("Speaker 2", "The onboarding flow is the first thing to fix."),
    ("Speaker 1", "Agreed; support tickets about it doubled."),
    ("Speaker 3", "I can have a prototype by Friday."),
    ("Speaker 2", "Then we review it together on Monday."),
    ("Speaker 1", "Next: the pricing page experiment."),
    ("Speaker 3", "Conversion went up four percent in the test group."),
    ("Speaker 1", "Good. Let's roll it out to everyone."),
]


class ServicesProducer:
    """Writes through apps.recordings.services, in this process."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def create(self, label: str) -> str:
        self.session = recordings.create_session(workspace=self.workspace, label=label)
        return self.session.id

    def append(self, sequence: int, segment: SegmentInput) -> None:
        recordings.append_committed_segments(session=self.session, segments=[segment])

    def status(self, status: str) -> None:
        self.session = recordings.change_session_status(session=self.session, status=status)

    def final(self, segments: list[SegmentInput]) -> None:
        recordings.write_final_transcript(session=self.session, segments=segments)

    def board(self, board_id: str, payload: Any) -> None:
        recordings.publish_board(session=self.session, board_id=board_id, payload=payload,
                                 source_revision_kind=RevisionKind.FINAL)


def _wire(segment: SegmentInput) -> dict[str, Any]:
    return {"timestampStart": segment.timestamp_start, "timestampEnd": segment.timestamp_end,
            "speakerLabel": segment.speaker_label, "text": segment.text, "confidence": segment.confidence}


class ApiProducer:
    """Writes through the ingest API over HTTP, each call with its own Idempotency-Key."""

    def __init__(self, base_url: str, key: str) -> None:
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    def _send(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.request(method, f"/api/v1/ingest/sessions/{self.external_id}{path}", json=body,
                                     headers={"Idempotency-Key": str(uuid.uuid4())})
        if response.is_error:
            raise CommandError(f"{method} {path or '/'}: {response.status_code} {response.text}")
        return response.json()

    def create(self, label: str) -> str:
        self.external_id = f"simulated-{uuid.uuid4().hex[:12]}"
        return self._send("PUT", "", {"label": label})["id"]

    def append(self, sequence: int, segment: SegmentInput) -> None:
        self._send("POST", "/segments", {"segments": [{"sequence": sequence, **_wire(segment)}]})

    def status(self, status: str) -> None:
        self._send("POST", "/status", {"status": status})

    def final(self, segments: list[SegmentInput]) -> None:
        self._send("PUT", "/transcripts/final", {"segments": [_wire(s) for s in segments]})

    def board(self, board_id: str, payload: Any) -> None:
        self._send("PUT", f"/boards/{board_id}", {"status": "ready", "sourceRevisionKind": "final",
                                                  "payload": payload})


class Command(BaseCommand):
    help = "Produce live activity in a workspace (sessions, segments, status, boards), through the services " \
           "or, with --via-api, through the ingest API."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--sessions", type=int, default=1)
        parser.add_argument("--interval", type=float, default=0.5, help="seconds between committed segments")
        parser.add_argument("--segments", type=int, default=len(LINES), help="committed segments per session")
        parser.add_argument("--via-api", action="store_true", help="write through the ingest API over HTTP")
        parser.add_argument("--base-url", default=None, help="the service's URL (default: CONNECT_BASE_URL)")
        parser.add_argument("--ingest-key", default=None,
                            help="with --via-api: the key to use (default: one issued as 'simulate_activity')")

    def handle(self, *args, slug: str, sessions: int, interval: float, segments: int, via_api: bool = False,
               base_url: str | None = None, ingest_key: str | None = None, **options) -> None:
        if sessions < 1 or segments < 0 or interval < 0:
            raise CommandError("--sessions must be at least 1; --segments and --interval not negative")
        try:
            workspace = Workspace.objects.get(slug=slug)
        except Workspace.DoesNotExist:
            raise CommandError(f"no workspace {slug!r}") from None
        producer = ApiProducer(base_url or settings.CONNECT_BASE_URL, ingest_key or self._key(workspace)) \
            if via_api else ServicesProducer(workspace)
        for n in range(1, sessions + 1):
            session_id = producer.create(f"Simulated session {n}")
            self.stdout.write(f"session {session_id} created ({n}/{sessions})")
            lines = [LINES[i % len(LINES)] for i in range(segments)]
            for i, (speaker, text) in enumerate(lines):
                time.sleep(interval)
                producer.append(i, SegmentInput(i * 4000, i * 4000 + 3500, text, speaker_label=speaker,
                                                confidence=0.93))
                self.stdout.write(f"  segment {i + 1}/{segments}")
            producer.status(SessionStatus.PROCESSING)
            self.stdout.write("  processing")
            producer.final([SegmentInput(i * 4000, i * 4000 + 3500, text, speaker_label=speaker, confidence=0.98)
                            for i, (speaker, text) in enumerate(lines)])
            producer.board("summary", {"title": f"Simulated session {n}", "bullets": [t for _, t in lines[:3]]})
            producer.status(SessionStatus.COMPLETED)
            self.stdout.write(f"session {session_id} completed: final transcript and board written")
        self.stdout.flush()

    def _key(self, workspace: Workspace) -> str:
        """An ingest key of the workspace's oldest active member, replacing the previous run's."""
        member = Membership.objects.filter(workspace=workspace, is_active=True, user__is_active=True) \
            .order_by("created_at", "pk").first()
        if member is None:
            raise CommandError(f"{workspace.slug} has no active member to issue an ingest key")
        return tenancy.issue_ingest_key(membership=member, name="simulate_activity", replace=True).key
