"""Mechanisms whose stock way is swapped inside one process, A and B alternating round by round
(a busy machine disturbs both alike); each figure is the median of the rounds, per call.

- `sql`: whole requests through Django's test client (middleware, admission, view, encoding):
  the flat transcript and an event-log page (limit 100) with the selectors' SQL written by hand
  against ORM querysets that read the same rows (checked equal first).
- `gc`: a full collection (`gc.collect()`) in a process that built the app and holds
  `--objects` small live objects (stand-ins for open streams' state), with start-up's heap
  frozen (`gc.freeze`) and not: the event loop stalls for that long on each full collection.

    .venv/bin/python bench/mechanisms_inprocess.py sql gc

The database is DATABASE_URL, by default bench/ab.py's `bench/data/ab.sqlite3`, set up as the
harness sets up an in-process script (bench/harness.py `setup_django`); the API key is
BENCH_API_KEY or one issued here (`read_key`).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import DATA, read_key, setup_django  # noqa: E402

os.environ.setdefault("DATABASE_URL", f"sqlite:///{DATA / 'ab.sqlite3'}")
setup_django()

import orjson  # noqa: E402


def alternate(variants: dict, rounds: int, number: int) -> dict[str, float]:
    """Median per-call seconds of each variant (a function of no argument), interleaved."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            call = variants[name]
            start = time.perf_counter()
            for _ in range(number):
                call()
            times[name].append((time.perf_counter() - start) / number)
    return {name: statistics.median(t) for name, t in times.items()}


def report(title: str, a: str, b: str, result: dict[str, float]) -> None:
    print(f"| {title} | {result[a] * 1e3:.3f} | {result[b] * 1e3:.3f} | {result[b] / result[a]:.2f} |", flush=True)


def longest_transcript():
    from django.db.models import Count

    from apps.recordings.models import Transcript

    t = Transcript.objects.annotate(n=Count("segments")).order_by("-n").select_related("session__workspace").first()
    return t.session


def sql(args) -> None:
    from django.test import Client

    from apps.core.timestamps import IsoMs
    from apps.events import selectors as events
    from apps.recordings import selectors
    from apps.recordings.models import RevisionKind, Segment, Session

    session = longest_transcript()
    key = os.environ.get("BENCH_API_KEY") or read_key(session.workspace, "bench-mechanisms@example.invalid",
                                                      "bench-mechanisms")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_HOST="127.0.0.1")
    hand = {
        "segment_rows": selectors.segment_rows, "segment_stamp": selectors.segment_stamp,
        "_session_and_transcripts": selectors._session_and_transcripts, "read_log_rows": events.read_log_rows,
    }

    def orm_segment_rows(transcript, rows=selectors.FLAT_SEGMENT_ROWS):
        order = "session_committed_index" if transcript.revision_kind == RevisionKind.COMMITTED else "sequence"
        return list(Segment.objects.filter(transcript_id=transcript.id).order_by(order, "sequence").values_list(*rows.columns))

    def orm_session_and_transcripts(workspace, session_id, revision_kind, read=None):
        if read is not None and isinstance(read.alongside, selectors.TranscriptAlongside):
            return hand["_session_and_transcripts"](workspace, session_id, revision_kind, read)
        width = len(selectors.TRANSCRIPT_SESSION_FIELDS)
        found = list(Session.objects.filter(workspace=workspace, id=session_id).order_by("transcripts__revision_kind")
                     .values_list("id", "label", "updated_at", *selectors.TRANSCRIPT_ROWS.through("transcripts__")))
        if not found:
            from apps.core.errors import NotFound

            raise NotFound()
        transcripts = [selectors.TRANSCRIPT_ROWS.make(r[width:]) for r in found
                       if r[width] is not None and (not revision_kind or r[width + 1] == revision_kind)]
        first = found[0]
        return selectors.SessionRow(first[0], first[1], first[2].isoformat()), transcripts

    def orm_read_log_rows(*, after, limit, workspace_id, types=None, session_id=None):
        def fetch(qs):
            return [events.LogRow(i, t, s, o, d, p) for i, t, s, o, d, p in
                    qs.values_list("id", "type", "session_id", IsoMs("occurred_at"), "data", "position")]
        return events._read(fetch, after=after, limit=limit, workspace_id=workspace_id, types=types,
                            session_id=session_id, settled=True)

    orm = {"segment_rows": orm_segment_rows, "segment_stamp": lambda: None,
           "_session_and_transcripts": orm_session_and_transcripts, "read_log_rows": orm_read_log_rows}

    def use(which: dict) -> None:
        for name, function in which.items():
            setattr(events if name == "read_log_rows" else selectors, name, function)

    paths = {"transcript": f"/api/v1/sessions/{session.id}/transcript", "event-log page": "/api/v1/events?limit=100"}
    for title, path in paths.items():
        bodies = []
        for which in (hand, orm):
            use(which)
            response = client.get(path)
            assert response.status_code == 200, (response.status_code, response.content[:300])
            body = orjson.loads(response.content)
            bodies.append(body)
        if bodies[0] != bodies[1]:
            a, b = bodies
            diff = [(x, y) for x, y in zip(a.get("items", []), b.get("items", [])) if x != y][:1]
            raise SystemExit(f"{title}: the ORM rows answer otherwise: {len(a.get('items', []))} vs "
                             f"{len(b.get('items', []))} items; {a.get('nextCursor')} vs {b.get('nextCursor')}; {diff}")

        def get(which, path=path):
            def call():
                use(which)
                client.get(path)
            return call

        report(f"{title}, whole request (ms/request)", "hand SQL", "ORM",
               alternate({"hand SQL": get(hand), "ORM": get(orm)}, args.rounds, max(5, args.number // 10)))
    use(hand)


def collector(args) -> None:
    import subprocess

    results: dict[str, list[float]] = {"frozen": [], "not frozen": []}
    for r in range(args.rounds):
        for name in ("frozen", "not frozen") if r % 2 == 0 else ("not frozen", "frozen"):
            out = subprocess.run([sys.executable, __file__, "gc-child", str(args.objects), name], text=True,
                                 capture_output=True, check=True).stdout
            results[name].append(float(out.split()[-1]))
    report(f"full collection, app built + {args.objects} live objects (ms)", "frozen", "not frozen",
           {k: statistics.median(v) for k, v in results.items()})


def collector_child(objects: int, mode: str) -> None:
    import django.urls

    import connect.asgi  # noqa: F401 - the application, as a server process builds it

    django.urls.get_resolver().url_patterns  # noqa: B018 - resolved as on the first request
    gc.collect()
    if mode == "frozen":
        gc.freeze()
    live = [{"id": i, "buffer": [i], "state": {"n": i}} for i in range(objects)]
    times = []
    for _ in range(7):
        start = time.perf_counter()
        gc.collect()
        times.append(time.perf_counter() - start)
    print(len(live), statistics.median(times))


def main() -> int:
    if sys.argv[1:2] == ["gc-child"]:
        collector_child(int(sys.argv[2]), sys.argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="+", choices=["sql", "gc"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=200)
    parser.add_argument("--objects", type=int, default=5000)
    args = parser.parse_args()
    print("| what | A | B | B / A |\n|---|---:|---:|---:|")
    for what in args.what:
        {"sql": sql, "gc": collector}[what](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
