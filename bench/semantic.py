#!/usr/bin/env python3
"""Search by meaning benchmark (docs/decisions/semantic-search.md): the labelled set's quality
figures, the embedder's throughput, the backfill's time, the vector scan's candidates side by
side, and semantic / hybrid / keyword search in a workspace of --segments segments among ten.

    python bench/semantic.py --db sqlite --segments 300000 --parts latency load keyword-ab
    python bench/semantic.py --db postgresql --pg-name connect_sem_bench --parts latency load
    python bench/semantic.py --parts quality throughput        # no large database
    python bench/semantic.py --parts scan --rounds 3           # synthetic vectors, no database
    python bench/semantic.py --parts query --rounds 10         # the question's vector alone

Needs requirements/semantic.txt. The database (`bench/data/semantic-<N>.sqlite3`, or PostgreSQL
`connect_semantic_bench_<N>` / --pg-name) is created, migrated and seeded with seed_demo when
missing: one workspace `big` (sessions of 500 committed segments, finals for the completed ones)
and nine of 20 sessions. Its vectors are written as the backfill writes them (int8 + scale, one
row per segment, the current model's name), --distinct of its distinct texts embedded by the
model and every other text given one of their vectors: a search's cost depends on the number of
vectors, not on what they say, and embedding 300k texts takes an hour. The backfill of N real
segments is the throughput's figure times N, printed as such.

Parts: quality; throughput; query (the question's vector: CPU per question of each way of
calling the model, at one and two threads: bench/semantic_cpu.py `query_cost`); scan (every way
of finding the nearest vectors measured on the same synthetic vectors in turn, with its recall
against the exact ranking: bench/semantic_scan.py); latency (in this process, through the
functions the view calls, warm, one at a time: median and p90 over --rounds rounds of the
questions; the first search, which loads the vectors, apart); cpu (one request at a time through
Django's request path, CPU by part beside the sessions list's: `cpu_parts`); load and keyword-ab
(through `serve`: `served`; every search of the load a distinct question, the question cache's
hit rate read from /metrics).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SEGMENTS_PER_SESSION = 737
SESSIONS_LIST = "/api/v1/sessions?limit=100"
READ_SCOPES = ["svc:sessions:read", "svc:transcripts:read"]
QUESTIONS = [
    "what did we decide about the budget",
    "who is responsible for the release",
    "were there any problems with the customer",
    "when is the next deadline",
    "numbers for the quarter",
]


def database_url(db: str, segments: int, pg_name: str | None) -> str:
    """The benchmark database's URL (a PostgreSQL database is created when missing)."""
    if db == "sqlite":
        (ROOT / "bench" / "data").mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{ROOT / 'bench' / 'data' / f'semantic-{segments}.sqlite3'}"
    name = pg_name or f"connect_semantic_bench_{segments}"
    import psycopg

    with psycopg.connect("postgres://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgres://postgres@127.0.0.1:5432/{name}"


def setup_django(url: str) -> None:
    os.environ.setdefault("CONNECT_DEVELOPMENT", "1")
    os.environ["CONNECT_SEMANTIC_SEARCH"] = "1"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    os.environ["DATABASE_URL"] = url
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
    # seed_demo's sessions hold 500 committed segments, and a final revision when completed:
    # about SEGMENTS_PER_SESSION in all.
    elapsed, _ = timed(call_command, "seed_demo", "--workspace", "big", "--sessions",
                       str(max(1, round(segments / SEGMENTS_PER_SESSION))), "--segments", "500",
                       "--no-progress")  # fmt: skip
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


def upkeep() -> None:
    """What service runs after such a load (bench/harness.py `after_seed`): the search index
    compacted, PostgreSQL's statistics and visibility map (autovacuum), SQLite's WAL folded in."""
    from django.db import connection

    from apps.recordings.services import compact_search_index

    compact_search_index()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "PRAGMA wal_checkpoint(TRUNCATE)")


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
            from apps.recordings.search.semantic import nearest_revisions

            revisions = [timed(nearest_revisions, ws, q, None)[0] * 1000 for q in QUESTIONS * rounds]
            figures["query embedding p50 ms"] = round(statistics.median(embed), 1)
            figures["vector scan (nearest 1000) p50 ms"] = round(statistics.median(scan), 1)
            figures["nearest revisions (embedding, scan, read back) p50 ms"] = round(statistics.median(revisions), 1)
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


def distinct_lua(base: int) -> str:
    """wrk's script (harness.LUA) with every request's question made a distinct text: a number
    (`base`, new for each run, plus a per-thread offset and a counter) after the question's words."""
    from bench import harness

    return (
        harness.LUA.replace("local counter = 0", f"local counter = 0\nlocal base = {base}")
        .replace("#threads * 7919", "#threads * 1000003")
        .replace('return wrk.format("GET", paths[(counter %% #paths) + 1])',
                 'return wrk.format("GET", paths[(counter %% #paths) + 1] .. "+" .. tostring(base + counter))')
    )  # fmt: skip


METRICS_TOKEN = "bench-semantic-metrics"


def question_vectors(base: str) -> tuple[float, float] | None:
    """(asked, computed) question vectors of a server so far, from its /metrics (None: a
    server without the counters, such as a commit before the cache)."""
    from bench import harness

    status, body = harness.get_json(base + "/metrics", {"Authorization": f"Bearer {METRICS_TOKEN}"})
    if status != 200 or not isinstance(body, str):
        return None
    values = {}
    for line in body.splitlines():
        name, _, value = line.partition(" ")
        if name in ("connect_semantic_query_vectors_total", "connect_semantic_query_vectors_computed_total"):
            values[name] = float(value)
    if len(values) < 2:
        return None
    return values["connect_semantic_query_vectors_total"], values["connect_semantic_query_vectors_computed_total"]


def served(url: str, args: argparse.Namespace) -> dict:
    """Through `serve --workers 2` (bench/harness.py) on the benchmark database, workspace `big`.
    load: req/s of semantic and hybrid search beside the sessions list (limit=100) at
    --connections, in alternating rounds, the ratio of medians; every search a distinct
    question (`distinct_lua`: the question cache misses; its hit rate read from each server's
    /metrics), and semantic search of 5 questions asked again and again apart, labelled as
    cached. With --load-baseline, the same on a server of that commit in the same rounds. Each
    run's server CPU per request (all its processes, /proc). keyword-ab: keyword search (no
    `mode`, the default path) on this tree and on --baseline, alternating query by query at one
    connection (p50) and then at --connections (req/s)."""
    import contextlib
    import random
    import urllib.parse

    from apps.tenancy import services as tenancy
    from apps.tenancy.models import Workspace
    from bench import harness
    from bench.harness import Database, Endpoint

    kind = "sqlite" if url.startswith("sqlite") else "postgres"
    db = Database(kind, url, sqlite_path=Path(url.removeprefix("sqlite:///")) if kind == "sqlite" else None,
                  label=kind,
                  extra_env={"CONNECT_SEMANTIC_SEARCH": "1", "CONNECT_METRICS_TOKEN": METRICS_TOKEN})  # fmt: skip
    membership = tenancy.add_member(workspace=Workspace.objects.get(slug="big"), email="bench-semantic@example.invalid")
    key = tenancy.issue_api_key(membership=membership, scopes=READ_SCOPES, name="bench-semantic").key
    auth = {"Authorization": f"Bearer {key}"}

    def search(query: str, mode: str | None = None) -> str:  # the query last: distinct_lua appends to it
        params = {**({"mode": mode} if mode else {}), "query": query}
        return "/api/v1/transcripts/search?" + urllib.parse.urlencode(params)

    modes = [Endpoint(f"{mode} search", "connect", [search(q, mode) for q in QUESTIONS], auth, "nonempty")
             for mode in ("semantic", "hybrid")]  # fmt: skip
    repeated = Endpoint("semantic search, 5 questions repeated (cached)", "connect",
                        [search(q, "semantic") for q in QUESTIONS], auth, "nonempty")  # fmt: skip
    sessions = Endpoint("sessions list (limit=100)", "connect", [SESSIONS_LIST], auth, "items=100")
    keyword = [search(q.split()[-1]) for q in QUESTIONS]
    out: dict = {"db": kind, "connections": args.connections, "rounds": args.load_rounds, "seconds": args.duration}
    run_dir, _ = harness.new_run(f"semantic-{kind}")
    out["load average before"] = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        servers = {"connect": stack.enter_context(harness.connect_server(db, 2))}
        baseline_ref = args.baseline if "keyword-ab" in args.parts else args.load_baseline
        if baseline_ref:
            root = stack.enter_context(harness.baseline_worktree(baseline_ref, run_dir / "baseline"))
            servers["baseline"] = stack.enter_context(harness.connect_server(db, 2, root=root))
        for server in servers.values():  # each process loads the model and the workspace's vectors
            for e in modes + [sessions]:
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    r = harness.wrk(server.base, e, 10, 4, 2)
                    if r["requests"] >= 8 and not r["non_2xx"] + r["socket_errors"]:
                        break
                problem = harness.sanity_check(server.base, e)
                if problem:
                    raise RuntimeError(f"{server.name} {e.name}: {problem}")
        harness.drain(servers, limit_s=args.drain)

        def rounds_of(endpoints: list[tuple[str, Endpoint]], connections: int, seconds: float) -> dict:
            runs: dict[str, list[dict]] = {}
            for _ in range(args.load_rounds):
                for server, e in endpoints:
                    distinct = e.name in ("semantic search", "hybrid search")
                    lua = distinct_lua(random.randrange(10**9)) if distinct else harness.LUA
                    vectors = question_vectors(servers[server].base)
                    cpu = harness.cpu_seconds(servers[server].proc.pid)
                    r = harness.wrk(servers[server].base, e, seconds, connections, min(2, connections), lua=lua)
                    r["cpu_ms"] = 1000 * (harness.cpu_seconds(servers[server].proc.pid) - cpu) / max(1, r["requests"])
                    after = question_vectors(servers[server].base)
                    if vectors and after and after[0] > vectors[0]:
                        r["hit_rate"] = 1 - (after[1] - vectors[1]) / (after[0] - vectors[0])
                    runs.setdefault(f"{e.name} @ {server}", []).append(r)
                    harness.drain(servers, limit_s=args.drain)
            return {name: {"req/s": round(statistics.median(r["rps"] for r in rs), 1),
                           "p50 ms": round(statistics.median(r["p50_ms"] for r in rs), 1),
                           "server CPU ms/request": round(statistics.median(r["cpu_ms"] for r in rs), 2),
                           **({"question cache hit rate": round(statistics.mean(r["hit_rate"] for r in rs), 4)}
                              if all("hit_rate" in r for r in rs) else {}),
                           "errors": sum(r["non_2xx"] + r["socket_errors"] for r in rs)}
                    for name, rs in runs.items()}  # fmt: skip

        if "load" in args.parts:
            endpoints = [(server, e) for server in servers for e in modes + [sessions]]
            endpoints.append(("connect", repeated))
            out["load"] = rounds_of(endpoints, args.connections, args.duration)
            for server in servers:
                listing = out["load"][f"{sessions.name} @ {server}"]["req/s"]
                for e in modes + ([repeated] if server == "connect" else []):
                    ratio = out["load"][f"{e.name} @ {server}"]["req/s"] / listing
                    out[f"{e.name} ÷ sessions list req/s @ {server}"] = round(ratio, 3)
        if "keyword-ab" in args.parts:
            single = [(server, Endpoint(f"keyword {path.rsplit('=', 1)[1]}", server, [path], auth))
                      for path in keyword for server in ("connect", "baseline")]  # fmt: skip
            out["keyword one connection"] = rounds_of(single, 1, args.duration / 2)
            rotation = [(server, Endpoint("keyword rotation", server, keyword, auth))
                        for server in ("connect", "baseline")]  # fmt: skip
            out["keyword load"] = rounds_of(rotation, args.connections, args.duration)
    out["load average after"] = os.getloadavg()[0]
    (run_dir / "results.json").write_text(json.dumps(out, indent=2))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--pg-name", help="the PostgreSQL database (default connect_semantic_bench_<segments>)")
    parser.add_argument("--segments", type=int, default=300_000, help="segments in the big workspace (about)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--passages", type=int, default=1000, help="passages for the throughput figure")
    parser.add_argument("--distinct", type=int, default=3000, help="distinct texts embedded for the latency database")
    parser.add_argument("--parts", nargs="+", default=["quality", "throughput", "latency"],
                        help="quality throughput query scan seed latency cpu load keyword-ab")  # fmt: skip
    parser.add_argument("--scan-rows", type=int, default=300_000, help="synthetic vectors for --parts scan")
    parser.add_argument("--scan-queries", type=int, default=20)
    parser.add_argument("--scan-no-hnsw", action="store_true", help="scan: leave out the HNSW index (its build)")
    parser.add_argument("--scan-ways", nargs="+",
                        help="scan: only the ways whose name holds one of these (numpy's always)")  # fmt: skip
    parser.add_argument("--ivf-lists", nargs="+", type=int, default=[1024, 2048], help="scan: faiss IVF lists")
    parser.add_argument("--nprobes", nargs="+", type=int, default=[16, 32, 64], help="scan: faiss IVF lists searched")
    parser.add_argument("--connections", type=int, default=16, help="load: wrk connections")
    parser.add_argument("--duration", type=float, default=10.0, help="load, keyword-ab: seconds per wrk run")
    parser.add_argument("--load-rounds", type=int, default=3, help="load, keyword-ab: rounds")
    parser.add_argument("--drain", type=float, default=60.0,
                        help="load, keyword-ab: at most this many seconds of waiting for an idle machine between runs")
    parser.add_argument("--baseline", default="main", help="keyword-ab: the commit the keyword path is compared with")
    parser.add_argument("--load-baseline", help="load: also a server of this commit, in the same rounds")
    args = parser.parse_args()
    if "quality" in args.parts:
        print("quality (recall@10, nDCG@10):", quality(), flush=True)
    url = database_url(args.db, args.segments, args.pg_name)
    setup_django(url)
    if "scan" in args.parts:
        from bench.semantic_scan import scan_ab

        figures = scan_ab(args.scan_rows, args.scan_queries, args.rounds, hnsw_index=not args.scan_no_hnsw,
                          ways=args.scan_ways, ivf_lists=tuple(args.ivf_lists),
                          nprobes=tuple(args.nprobes))  # fmt: skip
        print("scan A/B:", json.dumps(figures, indent=1), flush=True)
    if "throughput" in args.parts:
        print("throughput:", throughput(args.passages), flush=True)
    if "query" in args.parts:
        from bench.semantic_cpu import query_cost

        print("question vector, CPU per question:", json.dumps(query_cost(args.rounds, QUESTIONS), indent=1), flush=True)
    if {"seed", "latency", "cpu", "load", "keyword-ab"} & set(args.parts):
        seed(args.segments)
        written = write_vectors(args.distinct)
        print("vectors:", written, flush=True)
        if written:
            upkeep()
    if "latency" in args.parts:
        print(f"latency ({args.db}):", json.dumps(latency(args.rounds)), flush=True)
    if "cpu" in args.parts:
        from bench.semantic_cpu import cpu_parts

        print(f"CPU per request by part ({args.db}):", json.dumps(cpu_parts(args.rounds, QUESTIONS, SESSIONS_LIST), indent=1), flush=True)
    if {"load", "keyword-ab"} & set(args.parts):
        print(f"served ({args.db}):", json.dumps(served(url, args), indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
