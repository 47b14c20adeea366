"""`simulate_activity SLUG [--sessions N] [--interval S] [--segments M]` (DESIGN.md §3).

A live producer through the services, so every step records its events (and webhooks fire):
per session, create it, append M committed segments S seconds apart, move it to processing
and then completed, write the final transcript and publish the boards. Prints progress and
exits by itself."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from apps.recordings import services as recordings
from apps.recordings.models import RevisionKind, SessionStatus
from apps.recordings.services import SegmentInput
from apps.tenancy.models import Workspace

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


class Command(BaseCommand):
    help = "Produce live activity in a workspace through the services (sessions, segments, status, boards)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--sessions", type=int, default=1)
        parser.add_argument("--interval", type=float, default=0.5, help="seconds between committed segments")
        parser.add_argument("--segments", type=int, default=len(LINES), help="committed segments per session")

    def handle(self, *args, slug: str, sessions: int, interval: float, segments: int, **options) -> None:
        if sessions < 1 or segments < 0 or interval < 0:
            raise CommandError("--sessions must be at least 1; --segments and --interval not negative")
        try:
            workspace = Workspace.objects.get(slug=slug)
        except Workspace.DoesNotExist:
            raise CommandError(f"no workspace {slug!r}") from None
        for n in range(1, sessions + 1):
            session = recordings.create_session(workspace=workspace, label=f"Simulated session {n}")
            self.stdout.write(f"session {session.id} created ({n}/{sessions})")
            lines = [LINES[i % len(LINES)] for i in range(segments)]
            for i, (speaker, text) in enumerate(lines):
                time.sleep(interval)
                recordings.append_committed_segments(
                    session=session,
                    segments=[SegmentInput(i * 4000, i * 4000 + 3500, text, speaker_label=speaker, confidence=0.93)],
                )
                self.stdout.write(f"  segment {i + 1}/{segments}")
            session = recordings.change_session_status(session=session, status=SessionStatus.PROCESSING)
            self.stdout.write("  processing")
            recordings.write_final_transcript(
                session=session,
                segments=[
                    SegmentInput(i * 4000, i * 4000 + 3500, text, speaker_label=speaker, confidence=0.98)
                    for i, (speaker, text) in enumerate(lines)
                ],
            )
            recordings.publish_board(
                session=session,
                board_id="summary",
                payload={"title": session.label, "bullets": [text for _, text in lines[:3]]},
                source_revision_kind=RevisionKind.FINAL,
            )
            session = recordings.change_session_status(session=session, status=SessionStatus.COMPLETED)
            self.stdout.write(f"session {session.id} completed: final transcript and board written")
        self.stdout.flush()
