#!/usr/bin/env python3
"""Search by meaning benchmark (docs/decisions/semantic-search.md): the labelled set's quality
figures, the embedder's throughput, the backfill's time, and semantic / hybrid / keyword latency
in a workspace of --segments segments among ten workspaces.

    python bench/semantic.py --db sqlite --segments 300000
    python bench/semantic.py --db postgresql --segments 300000
    python bench/semantic.py --parts quality throughput        # no large database

Needs requirements/semantic.txt. The database (`bench/data/semantic-<N>.sqlite3`, or PostgreSQL
`connect_semantic_bench_<N>`) is created, migrated and seeded with seed_demo when missing: one
workspace `big` (sessions of 500 committed segments, finals for the completed ones) and nine of
20 sessions. Its vectors are written as the backfill writes them (int8 + scale, one row per
segment, the current model's name), --distinct of its distinct texts embedded by the model and
every other text given one of their vectors: a search's cost depends on the number of vectors,
not on what they say, and embedding 300k texts takes an hour. The backfill of N real segments is
the throughput's figure times N, printed as such.

Latency is measured in this process, through the same functions the view calls
(`search_by_meaning`, `search_transcripts`), warm (the workspace's vectors loaded once), one at a
time: the median and p90 over --rounds rounds of the question rotation. The process's first
search of the workspace (the vectors' load) is printed apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
QUESTIONS = [
    "what did we decide about the budget",
    "who is responsible for the release",
    "were there any problems with the customer",
    "when is the next deadline",
    "numbers for the quarter",
]


def setup_django(db: str, segments: int) -> None:
    os.environ.setdefault("CONNECT_DEVELOPMENT", "1")
    os.environ["CONNECT_SEMANTIC_SEARCH"] = "1"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    if db == "sqlite":
        (ROOT / "bench" / "data").mkdir(parents=True, exist_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / 'bench' / 'data' / f'semantic-{segments}.sqlite3'}"
    else:
        name = f"connect_semantic_bench_{segments}"
        import psycopg

        with psycopg.connect("postgres://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{name}"
    import django

    django.setup()


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


def seed(segments: int) -> None:
    from django.core.management import call_command

    from apps.recordings.models import Segment

    call_command("migrate", "--no-input", verbosity=0)
    if Segment.objects.exists():
        return
    elapsed, _ = timed(call_command, "seed_demo", "--workspace", "big", "--sessions", str(max(1, segments // 500 * 5 // 9)),
                       "--segments", "500", "--no-progress")  # fmt: skip
    for n in range(9):
        call_command("seed_demo", "--workspace", f"other-{n}", "--sessions", "20", "--segments", "100", "--no-progress")
    print(f"seeded in {elapsed:.0f} s", flush=True)


def write_vectors(distinct: int) -> dict:
    """Every segment's vector: `distinct` of the distinct texts embedded, the others given one of
    theirs; returns the throughput."""
    from django.db import connection, transaction

    from apps.recordings.models import Segment, SegmentEmbedding
    from apps.recordings.semantic.embedders import current
    from apps.recordings.semantic.vectors import quantize
    from apps.recordings.semantic.writer import text_hash

    embedder = current()
    if SegmentEmbedding.objects.filter(model=embedder.name).count() >= Segment.objects.count():
        return {}
    texts = sorted(set(Segment.objects.values_list("text", flat=True)))
    embedded = texts[:: max(1, len(texts) // distinct)][:distinct]
    elapsed, rows = timed(embedder.passages, embedded)
    codes, scales = quantize(rows)
    # A text beyond the embedded sample takes a sample text's vector (by its hash): the search's
    # cost is the same, the vectors' content is not what is measured here.
    vectors = [(codes[i].tobytes(), float(scales[i])) for i in range(len(embedded))]
    by_text = {t: (*vectors[int(text_hash(t), 16) % len(vectors)], text_hash(t)) for t in texts}
    for i, t in enumerate(embedded):
        by_text[t] = (*vectors[i], text_hash(t))
    SegmentEmbedding.objects.all().delete()
    table = SegmentEmbedding._meta.db_table
    sql = (f"INSERT INTO {table} (segment_id, workspace_id, transcript_id, model, text_hash, vector, scale)"
           " VALUES (%s, %s, %s, %s, %s, %s, %s)")  # fmt: skip
    batch = []
    started = time.perf_counter()
    for segment_id, workspace_id, transcript_id, text in Segment.objects.values_list(
        "id", "workspace_id", "transcript_id", "text"
    ).iterator(chunk_size=5000):
        vector, scale, digest = by_text[text]
        batch.append((segment_id, workspace_id, transcript_id, embedder.name, digest, vector, scale))
        if len(batch) == 5000:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.executemany(sql, batch)
            batch = []
    if batch:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, batch)
    return {"distinct texts": len(texts), "embedded": len(embedded), "passages/s": round(len(embedded) / elapsed, 1),
            "vector rows write seconds": time.perf_counter() - started}  # fmt: skip


def throughput(count: int) -> dict:
    """The embedder alone on `count` labelled-set-like passages, batches of 64, one thread."""
    from apps.recordings.semantic.embedders import current
    from tests.recordings.semantic_set import MEETINGS

    lines = [line for lines in MEETINGS.values() for line in lines]
    passages = [f"{lines[i % len(lines)]} ({i})" for i in range(count)]
    load, embedder = timed(current)
    elapsed, _ = timed(embedder.passages, passages)
    query, _ = timed(lambda: [embedder.query(q) for q in QUESTIONS])
    return {"model": embedder.name, "load s": round(load, 1), "passages/s": round(count / elapsed, 1),
            "ms per query": round(1000 * query / len(QUESTIONS), 1),
            "backfill of 300k segments (h)": round(300_000 / (count / elapsed) / 3600, 2)}  # fmt: skip


def latency(rounds: int) -> dict:
    from apps.recordings.models import Segment
    from apps.recordings.search import search_transcripts
    from apps.recordings.search.semantic import search_by_meaning
    from apps.tenancy.models import Workspace

    ws = Workspace.objects.get(slug="big")
    size = Segment.objects.filter(workspace=ws).count()
    first, _ = timed(search_by_meaning, workspace=ws, query=QUESTIONS[0], mode="semantic", limit=20)
    figures = {"segments in workspace": size, "first search (loads vectors) ms": round(1000 * first)}
    for mode in ("keyword", "semantic", "hybrid"):
        samples = []
        for _ in range(rounds):
            for q in QUESTIONS:
                if mode == "keyword":
                    elapsed, _ = timed(search_transcripts, workspace=ws, query=q.split()[-1], limit=20)
                else:
                    elapsed, _ = timed(search_by_meaning, workspace=ws, query=q, mode=mode, limit=20)
                samples.append(elapsed * 1000)
        samples.sort()
        figures[f"{mode} p50 ms"] = round(statistics.median(samples), 1)
        if mode == "semantic":  # where a semantic search's time goes: the query's vector, the scan
            from apps.recordings.semantic import index
            from apps.recordings.semantic.embedders import current

            embedder = current()
            vectors = [embedder.query(q) for q in QUESTIONS]
            embed = [timed(embedder.query, q)[0] * 1000 for q in QUESTIONS * rounds]
            scan = [timed(index.nearest, ws.id, embedder.name, v, 1000)[0] * 1000 for v in vectors * rounds]
            figures["query embedding p50 ms"] = round(statistics.median(embed), 1)
            figures["vector scan (nearest 1000) p50 ms"] = round(statistics.median(scan), 1)
        figures[f"{mode} p90 ms"] = round(samples[int(len(samples) * 0.9)], 1)
    return figures


def quality() -> dict:
    """recall@10 / nDCG@10 per mode on the labelled set, in a throwaway SQLite database."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-n", "0", "-p", "no:logging",
         "tests/recordings/test_semantic_quality.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    line = next(line for line in out.splitlines() if line.startswith("{'keyword'"))
    return eval(line, {})  # the test prints its figures as a dict literal  # noqa: S307


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--segments", type=int, default=300_000, help="segments in the big workspace (about)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--passages", type=int, default=1000, help="passages for the throughput figure")
    parser.add_argument("--distinct", type=int, default=3000, help="distinct texts embedded for the latency database")
    parser.add_argument("--parts", nargs="+", default=["quality", "throughput", "latency"])
    args = parser.parse_args()
    if "quality" in args.parts:
        print("quality (recall@10, nDCG@10):", quality(), flush=True)
    setup_django(args.db, args.segments)
    if "throughput" in args.parts:
        print("throughput:", throughput(args.passages), flush=True)
    if "latency" in args.parts:
        seed(args.segments)
        print("vectors:", write_vectors(args.distinct), flush=True)
        print(f"latency ({args.db}):", latency(args.rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
