"""In-process search measurements for bench/search.py (run with DATABASE_URL set; bench/harness.py
`run_probe` runs it, `setup_django` sets it up).

    python -m bench.search_probe info --workspace bench --queries '["release", "zeppelin"]'
    python -m bench.search_probe time --workspace bench --queries '["release"]' --runs 30
    python -m bench.search_probe cpu --workspace bench --queries '["release"]' --runs 20
    python -m bench.search_probe append --segments 5000 --appends 200

`info`: the workspace's id and segment count, a fresh API key, and for each query the number of
the workspace's segments it matches (the frequency the benchmark prints); with `--sessions N`
also the database's segment count and the ids of the workspace's newest N sessions with a
transcript (bench/scale.py).
`time`: search_transcripts() in process, per query p50/p99/max in ms (no HTTP).
`cpu`: the CPU one search costs, per query: this process's (`process_time`) and its PostgreSQL
backend's (utime + stime from /proc, so the server must run on this machine), in ms per run,
after one warm-up run.
`append`: a session with N committed segments (bulk-written), then `appends` single-segment
appends through services.append_committed_segments (the realtime path, with its event and
index maintenance), p50/p90/p99/max in ms, and the statements one more (untimed) append
sends, BEGIN and COMMIT included; the probe workspace is deleted afterwards.
Each prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import read_key, setup_django  # noqa: E402

setup_django()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from apps.recordings import services  # noqa: E402
from apps.recordings.models import Segment, Session  # noqa: E402
from apps.recordings.search import query_terms, search_transcripts  # noqa: E402
from apps.recordings.search.sqlite import WORKSPACE_SHIFT  # noqa: E402
from apps.recordings.search.terms import fts5_match  # noqa: E402
from apps.tenancy.models import Workspace  # noqa: E402


def matching_segments(workspace: Workspace, query: str) -> int:
    """How many of the workspace's segments contain every word of `query` (through the index)."""
    terms = query_terms(query)
    if not terms:
        return 0
    with connection.cursor() as db:
        if connection.vendor == "sqlite":
            db.execute("SELECT id FROM recordings_search_workspace WHERE workspace_id = %s", [workspace.id])
            row = db.fetchone()
            if row is None:
                return 0
            db.execute(
                "SELECT count(*) FROM recordings_segment_fts WHERE recordings_segment_fts MATCH %s"
                " AND rowid >= %s AND rowid < %s",
                [fts5_match(terms), row[0] << WORKSPACE_SHIFT, (row[0] + 1) << WORKSPACE_SHIFT],
            )
        else:
            # A scan of the segments: no index serves `@@` since the search reads the index by
            # revision (the GIN index was dropped); run once per benchmark.
            db.execute(
                "SELECT count(*) FROM recordings_segment WHERE search_vector @@ connect_search_query(%s, %s)",
                [workspace.id, " ".join(terms)],
            )
        return db.fetchone()[0]


def info(args) -> dict:
    workspace = Workspace.objects.get(slug=args.workspace)
    key = read_key(workspace, "bench-search@example.invalid", "bench-search")
    queries = json.loads(args.queries)
    return {
        "workspace": workspace.id,
        "segments": Segment.objects.filter(workspace=workspace).count(),
        "api_key": key,
        "matches": {q: matching_segments(workspace, q) for q in queries},
        **({"total_segments": Segment.objects.count(),
            "session_ids": list(Session.objects.filter(workspace=workspace, transcripts__isnull=False).distinct()
                                .order_by("-created_at", "-id").values_list("id", flat=True)[: args.sessions])}
           if args.sessions else {}),
    }  # fmt: skip


def time_queries(args) -> dict:
    workspace = Workspace.objects.get(slug=args.workspace)
    out = {}
    for query in json.loads(args.queries):
        timings = []
        for _ in range(args.runs + 2):
            started = time.perf_counter()
            search_transcripts(workspace=workspace, query=query, limit=20)
            timings.append((time.perf_counter() - started) * 1000)
        timings = sorted(timings[2:])
        out[query] = {
            "p50_ms": statistics.median(timings),
            "p99_ms": timings[min(len(timings) - 1, int(len(timings) * 0.99))],
            "max_ms": timings[-1],
        }
    return out


def backend_cpu_ms(pid: int) -> float:
    """The CPU a PostgreSQL backend on this machine has used: utime + stime, in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def cpu(args) -> dict:
    if connection.vendor != "postgresql":
        raise SystemExit("cpu: PostgreSQL only (the backend's CPU is read from /proc)")
    workspace = Workspace.objects.get(slug=args.workspace)
    with connection.cursor() as db:
        db.execute("SELECT pg_backend_pid()")
        pid = db.fetchone()[0]
    out = {}
    for query in json.loads(args.queries):
        search_transcripts(workspace=workspace, query=query, limit=20)
        client, backend = time.process_time(), backend_cpu_ms(pid)
        for _ in range(args.runs):
            search_transcripts(workspace=workspace, query=query, limit=20)
        out[query] = {
            "python_ms": (time.process_time() - client) * 1000 / args.runs,
            "postgresql_ms": (backend_cpu_ms(pid) - backend) / args.runs,
        }
    return out


def append(args) -> dict:
    workspace, _ = Workspace.objects.get_or_create(slug="append-probe", defaults={"name": "Append probe"})
    try:
        start = timezone.now() - timedelta(hours=5)
        session = services.create_session(workspace=workspace, label="Long recording", at=start)
        backlog = [
            services.SegmentInput(timestamp_start=i * 3000, timestamp_end=i * 3000 + 2500,
                                  text=f"backlog segment {i} about the release and the roadmap", speaker_label="A")
            for i in range(args.segments)
        ]  # fmt: skip
        for i in range(0, len(backlog), 1000):  # the hours already recorded
            services.append_committed_segments(session=session, segments=backlog[i : i + 1000])
        timings = []
        for n in range(args.appends):
            segment = services.SegmentInput(
                timestamp_start=(args.segments + n) * 3000, timestamp_end=(args.segments + n) * 3000 + 2500,
                text=f"live segment {n}: we should ship the release on Friday after the review", speaker_label="B",
            )  # fmt: skip
            started = time.perf_counter()
            services.append_committed_segments(session=session, segments=[segment])
            timings.append((time.perf_counter() - started) * 1000)
        hits, _ = search_transcripts(workspace=workspace, query=f"live segment {args.appends - 1}", limit=5)
        # One more append, untimed (capturing makes every statement slower), for its statements.
        segment = services.SegmentInput(timestamp_start=0, timestamp_end=1, text="counted", speaker_label="B")
        with CaptureQueriesContext(connection) as captured:
            services.append_committed_segments(session=session, segments=[segment])
        timings.sort()
        return {
            "segments_before": args.segments,
            "appends": args.appends,
            "p50_ms": statistics.median(timings),
            "p90_ms": timings[int(len(timings) * 0.9)],
            "p99_ms": timings[min(len(timings) - 1, int(len(timings) * 0.99))],
            "max_ms": timings[-1],
            "statements": len(captured.captured_queries),
            "last_append_found": bool(hits),
        }
    finally:
        workspace.delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info")
    p.add_argument("--workspace", required=True)
    p.add_argument("--queries", default="[]")
    p.add_argument("--sessions", type=int, default=0, help="also the ids of the newest N sessions with a transcript")
    p = sub.add_parser("time")
    p.add_argument("--workspace", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--runs", type=int, default=30)
    p = sub.add_parser("cpu")
    p.add_argument("--workspace", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--runs", type=int, default=20)
    p = sub.add_parser("append")
    p.add_argument("--segments", type=int, default=5000)
    p.add_argument("--appends", type=int, default=200)
    args = parser.parse_args()
    result = {"info": info, "time": time_queries, "cpu": cpu, "append": append}[args.command](args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
