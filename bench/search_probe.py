"""Tune transcript search on a large scratch database (not a test, not the full benchmark).

    DATABASE_URL=sqlite:////tmp/searchbench.sqlite3 python bench/search_probe.py load
    DATABASE_URL=sqlite:////tmp/searchbench.sqlite3 python bench/search_probe.py probe
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/searchbench python bench/search_probe.py load

`load` migrates and fills the database with SESSIONS sessions, each with a committed and a
final revision of SEGMENTS/2 segments (1,000,000 segments by default), through bulk ORM inserts
so the database's own index maintenance (triggers, generated column) does the indexing.
Marker words occur in a known share of segments, so queries hit 0.1 % to 5 % of them.
`probe` times search_transcripts() in process and prints p50/p95 per query, plus the plan.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
os.environ.setdefault("CONNECT_DEVELOPMENT", "1")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from apps.core.ids import new_id  # noqa: E402
from apps.recordings.models import RevisionKind, Segment, Session, Transcript  # noqa: E402
from apps.recordings.search import _page_sql, query_terms, search_transcripts  # noqa: E402
from apps.tenancy.models import Workspace  # noqa: E402

SESSIONS = int(os.environ.get("PROBE_SESSIONS", 2000))
SEGMENTS = int(os.environ.get("PROBE_SEGMENTS", 500))  # per session, split over the two revisions
MARKERS = {"kubernetes": 0.001, "invoice": 0.005, "roadmap": 0.01, "budget": 0.02, "customer": 0.05}
QUERIES = ["kubernetes", "invoice", "roadmap", "budget", "budget roadmap", "customer budget", "customer"]
COMMON = "the a and to of in is it that we you for on this with be are so just".split()
START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def sentence(rng: random.Random, vocabulary: list[str], weights: list[float]) -> str:
    words = rng.choices(vocabulary, cum_weights=weights, k=rng.randint(8, 25))
    for marker, share in MARKERS.items():
        if rng.random() < share:
            words.insert(rng.randrange(len(words) + 1), marker)
    return " ".join(words).capitalize() + "."


def load() -> None:
    call_command("migrate", verbosity=0)
    rng = random.Random(42)
    vocabulary = COMMON + [f"w{i}" for i in range(5000)]
    cumulative, total = [], 0.0
    for rank in range(1, len(vocabulary) + 1):  # Zipf
        total += 1 / rank
        cumulative.append(total)
    workspace, _ = Workspace.objects.get_or_create(slug="probe", defaults={"name": "Probe"})
    other, _ = Workspace.objects.get_or_create(slug="probe-other", defaults={"name": "Other"})
    started = time.monotonic()
    for i in range(SESSIONS):
        ws = other if i % 50 == 49 else workspace  # a neighbour tenant with 2 % of the rows
        at = START + timedelta(minutes=30 * i)
        with transaction.atomic():
            session = Session.objects.create(
                workspace=ws, label=f"Probe {i}", status="completed", started_at=at, ended_at=at,
                created_at=at, updated_at=at,
            )
            rows = []
            for kind in (RevisionKind.COMMITTED, RevisionKind.FINAL):
                transcript = Transcript.objects.create(workspace=ws, session=session, revision_kind=kind, created_at=at)
                for n in range(SEGMENTS // 2):
                    rows.append(Segment(
                        id=new_id(), workspace=ws, transcript=transcript, sequence=n, session_committed_index=n,
                        timestamp_start=n * 3000, timestamp_end=n * 3000 + 2500, speaker_label=f"Speaker {n % 3}",
                        text=sentence(rng, vocabulary, cumulative), confidence=0.9, created_at=at,
                    ))
            Segment.objects.bulk_create(rows, batch_size=1000)
        if i % 100 == 99:
            print(f"{i + 1} sessions, {time.monotonic() - started:.0f} s", flush=True)
    with connection.cursor() as db:
        db.execute("ANALYZE")
    print(f"loaded {Segment.objects.count()} segments in {time.monotonic() - started:.0f} s")


def probe(runs: int = 30) -> None:
    workspace = Workspace.objects.get(slug="probe")
    print(f"{connection.vendor}: {Segment.objects.count()} segments, {Transcript.objects.count()} transcripts")
    for query in QUERIES:
        timings = []
        for _ in range(runs + 3):
            started = time.perf_counter()
            hits, cursor = search_transcripts(workspace=workspace, query=query, limit=20)
            timings.append((time.perf_counter() - started) * 1000)
        timings = sorted(timings[3:])
        second = []
        for _ in range(5):
            started = time.perf_counter()
            search_transcripts(workspace=workspace, query=query, limit=20, cursor=cursor)
            second.append((time.perf_counter() - started) * 1000)
        print(
            f"{query!r:22} hits={len(hits):2} p50={statistics.median(timings):7.1f} ms "
            f"p95={timings[int(len(timings) * 0.95) - 1]:7.1f} ms  page2 p50={statistics.median(second):7.1f} ms",
            flush=True,
        )
    if "--plan" in sys.argv:
        sql, params = _page_sql(connection.vendor, query_terms("budget"), workspace.id, None, None, 21)
        with connection.cursor() as db:
            if connection.vendor == "sqlite":
                db.execute("EXPLAIN QUERY PLAN " + sql, params)
                print("\n".join(str(r[-1]) for r in db.fetchall()))
            else:
                db.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
                print("\n".join(r[0] for r in db.fetchall()))


if __name__ == "__main__":
    {"load": load, "probe": probe}[sys.argv[1]]()
