"""`seed_demo [--workspace SLUG] [--sessions N] [--segments M]`: realistic demo data.

Idempotent: session number i of a workspace is always generated from the seed and i, and a run
only creates the sessions numbered from the workspace's current session count up to N. Running
it twice changes nothing; running it with a larger N adds the missing sessions.

Each session is planned as it would end up after its life through the recordings services
(created, segments appended in chunks, status changes, board versions, final revision), and
written with the services' bulk import (`import_sessions`), BATCH sessions per transaction. The
bulk import is a backfill: historic demo data records no realtime events.
"""

from __future__ import annotations

import multiprocessing
import random
import sys
import time
from datetime import datetime, timedelta
from functools import partial

from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.utils import timezone

from apps.recordings import services as recordings
from apps.recordings.management import demo_content
from apps.recordings.models import BoardStatus, RevisionKind, Session, SessionStatus
from apps.recordings.services import ImportedBoard, ImportedSession, SegmentInput
from apps.tenancy import services as tenancy
from apps.tenancy.models import Workspace

DEMO_EMAIL = "demo@example.com"
DEMO_PASSWORD = "demo-password"
DEFAULT_SEED = 20260101
# Committed segments arrive in realtime; appending them in a few chunks gives them
# realistic, increasing created_at values without a query per segment.
COMMITTED_CHUNKS = 5
BATCH = 25  # sessions per transaction of the bulk import
PROGRESS_THRESHOLD = 100  # show a progress bar when creating at least this many sessions

STATUS_WEIGHTS = {
    SessionStatus.COMPLETED: 70,
    SessionStatus.PROCESSING: 10,
    SessionStatus.RECORDING: 8,
    SessionStatus.FAILED: 12,
}


def close_connections_before_fork() -> None:
    """Forked children must share no database connection with the parent. On PostgreSQL a
    closed connection only returns to the pool, so the pool is closed too."""
    for connection in connections.all():
        connection.close()
        if getattr(connection, "pool", None) is not None:
            connection.close_pool()


class Command(BaseCommand):
    help = (
        "Create realistic demo data: a workspace (default 'demo') with the staff member "
        f"{DEMO_EMAIL} (password '{DEMO_PASSWORD}'), and up to N sessions with committed "
        "transcripts, final transcripts and boards for completed sessions. Idempotent: it only "
        "creates the sessions the workspace is missing, deterministically from the seed. "
        "Prints a summary as the last line; it does not issue an API key (use issue_api_key)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--workspace", default="demo", help="workspace slug (created if missing)")
        parser.add_argument("--sessions", type=int, default=25, help="sessions the workspace should have")
        parser.add_argument("--segments", type=int, default=40, help="committed segments per session")
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (fixed by default)")
        parser.add_argument(
            "--jobs",
            type=int,
            default=1,
            help="worker processes (PostgreSQL: the database works while Python builds the next "
            "inserts; SQLite has one writer, so more than 1 gains little there)",
        )
        parser.add_argument("--no-progress", action="store_true", help="never show the progress bar")

    def handle(
        self, *args, workspace: str, sessions: int, segments: int, seed: int, jobs: int, no_progress: bool, **options
    ):
        if sessions < 0 or segments < 1 or jobs < 1:
            raise CommandError("--sessions must be ≥ 0, --segments and --jobs ≥ 1")
        started = time.monotonic()
        ws = Workspace.objects.filter(slug=workspace).first()
        if ws is None:
            try:
                ws = tenancy.create_workspace(slug=workspace, name=workspace.replace("-", " ").title())
            except Exception as exc:  # e.g. an invalid slug rejected by the database
                raise CommandError(f"cannot create workspace {workspace!r}: {exc}") from exc
        tenancy.add_member(workspace=ws, email=DEMO_EMAIL, password=DEMO_PASSWORD, staff=True)

        existing = Session.objects.filter(workspace=ws).count()
        todo = range(existing, sessions)
        show_progress = not no_progress and len(todo) >= PROGRESS_THRESHOLD
        now = timezone.now()
        totals = {"segments": 0, "boards": 0}
        one = partial(seed_batch_by_id, ws.pk, seed=seed, segment_count=segments, now=now)
        batches = [list(todo[i : i + BATCH]) for i in range(0, len(todo), BATCH)]
        if jobs == 1:
            results = map(one, batches)
        else:
            close_connections_before_fork()
            pool = multiprocessing.get_context("fork").Pool(jobs)
            results = pool.imap_unordered(one, batches)
        done = 0
        try:
            for counts in results:
                done += counts["sessions"]
                totals["segments"] += counts["segments"]
                totals["boards"] += counts["boards"]
                if show_progress:
                    self._progress(done, len(todo), started)
        except BaseException:
            if jobs > 1:
                pool.terminate()  # stop the other workers too; committed sessions stay (idempotent re-run)
            raise
        finally:
            if jobs > 1:
                pool.close()
                pool.join()
        if show_progress:
            self.stderr.write("")
        if todo:
            recordings.refresh_statistics()

        self.stdout.write(
            f"{ws.slug}: {max(existing, sessions)} sessions ({len(todo)} created, "
            f"{totals['segments']} segments, {totals['boards']} board versions) "
            f"in {time.monotonic() - started:.1f}s"
        )

    def _progress(self, done: int, total: int, started: float) -> None:
        # Every 1% is enough: redrawing a terminal line per session slows large seeds.
        if done != total and done % max(1, total // 100):
            return
        width = 30
        filled = width * done // total
        elapsed = time.monotonic() - started
        eta = elapsed / done * (total - done)
        self.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} sessions "
            f"{elapsed:5.0f}s elapsed, ~{eta:.0f}s left",
            ending="",
        )
        sys.stderr.flush()


def pick_status(rng: random.Random) -> str:
    return rng.choices(list(STATUS_WEIGHTS), weights=list(STATUS_WEIGHTS.values()))[0]


def pick_created_at(rng: random.Random, status: str, duration: timedelta, now: datetime) -> datetime:
    """Finished sessions spread over the past six weeks in working hours; live ones are recent."""
    if status == SessionStatus.RECORDING:
        return now - duration - timedelta(seconds=rng.randint(5, 120))
    if status == SessionStatus.PROCESSING:
        return now - duration - timedelta(minutes=rng.randint(2, 90))
    day = (now - timedelta(days=rng.randint(1, 42))).date()
    while day.weekday() >= 5:
        day -= timedelta(days=1)
    start = datetime(day.year, day.month, day.day, rng.randint(8, 16), rng.choice((0, 15, 30, 45)), tzinfo=now.tzinfo)
    return start + timedelta(seconds=rng.randint(0, 240))


def _inputs(specs) -> list[SegmentInput]:
    return [
        SegmentInput(
            timestamp_start=s.start_ms,
            timestamp_end=s.end_ms,
            text=s.text,
            speaker_label=s.speaker,
            confidence=s.confidence,
        )
        for s in specs
    ]


def seed_batch_by_id(workspace_id: str, indexes: list[int], **kwargs) -> dict[str, int]:
    return seed_batch(Workspace.objects.get(pk=workspace_id), indexes=indexes, **kwargs)


def seed_batch(ws: Workspace, *, indexes: list[int], seed: int, segment_count: int, now: datetime) -> dict[str, int]:
    """Create demo sessions number `indexes` of `ws` with the bulk import, in one transaction."""
    counts = {"sessions": len(indexes), "segments": 0, "boards": 0}
    sessions = []
    for index in indexes:
        session = plan_session(ws, index=index, seed=seed, segment_count=segment_count, now=now)
        counts["segments"] += sum(len(part) for _, part in session.committed) + len(session.final or [])
        counts["boards"] += len(session.boards or [])
        sessions.append(session)
    recordings.import_sessions(workspace=ws, sessions=sessions)
    return counts


def plan_session(ws: Workspace, *, index: int, seed: int, segment_count: int, now: datetime) -> ImportedSession:
    """Demo session number `index` of `ws` as it ends up after its life through the services:
    created recording, committed segments appended in chunks, status changes, board versions,
    a final revision for completed sessions."""
    rng = random.Random(f"{seed}:{ws.slug}:{index}")
    status = pick_status(rng)
    m = demo_content.meeting(rng, segment_count)
    duration = timedelta(milliseconds=m.duration_ms + rng.randint(1000, 20000))
    created_at = pick_created_at(rng, status, duration, now)
    ended_at = created_at + duration

    session = ImportedSession(
        label=m.label, memo=m.memo, status=SessionStatus.RECORDING, started_at=created_at, ended_at=None,
        created_at=created_at, updated_at=created_at, committed=[], boards=[],
    )  # fmt: skip
    chunk = -(-len(m.segments) // COMMITTED_CHUNKS)
    for start in range(0, len(m.segments), chunk):
        part = m.segments[start : start + chunk]
        session.committed.append((created_at + timedelta(milliseconds=part[-1].end_ms), _inputs(part)))
    if status == SessionStatus.RECORDING:
        return session

    def change_status(to: str, at: datetime) -> None:
        if session.status == SessionStatus.RECORDING:
            session.ended_at = at
        session.status, session.updated_at = to, at

    def board(board_id: str, source: str, at: datetime, board_status: str = BoardStatus.READY) -> datetime:
        at = min(at, now)  # a recent session's later versions must not be dated in the future
        payload = {} if board_status != BoardStatus.READY else demo_content.board_payload(rng, board_id, m, at.date())
        session.boards.append(ImportedBoard(board_id, payload, source, board_status, at))
        return at + timedelta(seconds=rng.randint(20, 600))

    if status == SessionStatus.FAILED:
        # Some recordings fail while recording, others while being processed.
        if rng.random() < 0.5:
            change_status(SessionStatus.PROCESSING, ended_at)
            ended_at += timedelta(minutes=rng.randint(1, 10))
        change_status(SessionStatus.FAILED, ended_at)
        return session

    # The rest is post-processing: a first summary is generated from the committed revision.
    if status == SessionStatus.PROCESSING or rng.random() < 0.8:
        change_status(SessionStatus.PROCESSING, ended_at)
    at = ended_at + timedelta(seconds=rng.randint(5, 60))
    if status == SessionStatus.PROCESSING:
        board("summary", RevisionKind.COMMITTED, at, BoardStatus.GENERATING)
        return session

    at = board("summary", RevisionKind.COMMITTED, at)
    final = demo_content.final_revision(rng, m.segments)
    at += timedelta(minutes=rng.randint(2, 15))
    change_status(SessionStatus.COMPLETED, at)
    session.final, session.final_at = _inputs(final), at
    at = board("summary", RevisionKind.FINAL, at + timedelta(seconds=30))
    if rng.random() < 0.3:  # someone asked for a regenerated summary later
        at = board("summary", RevisionKind.FINAL, at + timedelta(hours=rng.randint(1, 30)))
    for board_id in ("action-items", "decisions"):
        versions = rng.randint(1, 3)
        for v in range(versions):
            # An occasional failed generation, retried by the next version.
            failed = v < versions - 1 and rng.random() < 0.25
            at = board(board_id, RevisionKind.FINAL, at, BoardStatus.FAILED if failed else BoardStatus.READY)
    return session
