#!/usr/bin/env python3
"""Search benchmark: Connect's search on 1.5M segments, side by side with Datasette.

    python bench/search.py                          # both databases, every part
    python bench/search.py --db sqlite --parts rotation load
    python bench/search.py --parts ten              # seeds ten more workspaces first (slow)

Databases: SQLite `bench/data/search.sqlite3`, PostgreSQL `connect_search_bench` (created,
migrated and seeded with `seed_demo --workspace bench --sessions 2000 --segments 500` when
missing; the seed time is printed). Parts, each on both databases:

- rotation: each query of the rotation alone at 1 connection (`wrk -c1`), p50/p99, with the
  share of the workspace's segments it matches;
- load: the whole rotation at 32 connections (`--connections`) on `serve --workers 2`, req/s,
  beside the sessions list (limit=100) on the same server and Datasette's FTS search over the
  same FTS5 index and queries (SQLite), same rounds, side by side;
- common: two- and three-word queries of common words drawn with a fixed seed, at 1 connection;
- shapes: the query shapes that must stay bounded (many words, very common words, long words, 500
  characters) at 1 connection;
- append: p50 of appending one segment to a session of 5,000 (bench/search_probe.py append);
- ten: the workspace `solo` (200 sessions) at 1 connection, then again after ten more workspaces
  of the same size are seeded into the same database (seeded once, kept).

With `--baseline REF` the same parts also run against Connect at git commit REF (a worktree
under the run's results directory, removed afterwards) on the same database, alternating with
the working tree's Connect query by query and round by round: before/after figures from one run.

Rounds alternate the measured things and each figure is the median over the rounds: the machine
is shared and noisy, neighbours in time are what compare. Results: a markdown table on stdout
and in bench/results/search-<time>/results.md, raw numbers in results.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness as rest  # noqa: E402 - the shared harness, by its old name here
from bench.harness import (  # noqa: E402
    DATA, PYTHON, ROOT, Database, Endpoint, Server, baseline_worktree, log, new_run, save_results,
)

PG_NAME = "connect_search_bench"
# (what it is, query): the rotation, words of the demo vocabulary picked by their frequency.
ROTATION = [
    ("word in ~30 % of segments", "release"),
    ("word in ~5 %", "numbers"),
    ("rare word", "lisbon"),
    ("word that matches nothing", "zeppelin"),
    ("two words", "release renewal"),
    ("three words", "customer budget review"),
]
_COMMON = (
    "the we i to is on release think and that should about you before can so review for in it by "
    "roadmap update friday have do a at need of okay ship out numbers not first point just report"
).split()
# Two- and three-word queries of common words (issue 24 point 5: "any two- or three-word query of
# common words"), drawn from the 30 most common with a fixed seed, not picked by hand.
def _draw_common(sizes: tuple[int, ...], seed: int = 24) -> list[tuple[str, str]]:
    draw, queries = random.Random(seed), {}
    for n in sizes:
        while (q := " ".join(draw.sample(_COMMON[:30], n))) in queries:
            pass
        queries[q] = f"{n} common words"
    return [(what, q) for q, what in queries.items()]


COMMON_WORDS = _draw_common((2, 2, 2, 2, 2, 2, 3, 3, 3, 3))
SHAPES = [
    ("many words (12 common)", " ".join(_COMMON[:12])),
    ("very common words", "the we to is"),
    ("long words", "accessibility questionnaire procurement"),
    ("one 200-letter word", "x" * 200),
    ("500 characters, common words", " ".join(_COMMON * 3)[:500]),
    ("500 characters, one repeated word", ("release " * 63)[:500]),
]
TARGET_P50_MS, TARGET_P99_MS, TARGET_RPS, TARGET_VS_DATASETTE = 25.0, 60.0, 100.0, 15.0
TARGET_TEN_RATIO, TARGET_APPEND_MS, TARGET_SHAPE_MS = 1.5, 5.0, 200.0
TARGET_VS_LIST = 0.5  # search req/s against the sessions list's (limit=100), same connections and rounds
SESSIONS_LIST = "/api/v1/sessions?limit=100"
TEN_SESSIONS, SEGMENTS = 200, 500


def make_database(kind: str, pg_name: str = PG_NAME) -> Database:
    if kind == "sqlite":
        path = DATA / "search.sqlite3"
        return Database("sqlite", f"sqlite:///{path}", sqlite_path=path, label="sqlite")
    rest.ensure_postgres_database(pg_name)
    return Database("postgres", f"postgres://postgres@127.0.0.1:5432/{pg_name}", label="postgres")


def search_probe(db: Database, *args: str) -> dict:
    return rest.run_probe(db, "bench.search_probe", *args)


def seed(db: Database, workspace: str, sessions: int) -> float | None:
    """seed_demo unless the workspace has its sessions; the seconds it took, or None."""
    check = subprocess.run(
        [PYTHON, "manage.py", "shell", "-c",
         "from apps.recordings.models import Session;"
         f"print(Session.objects.filter(workspace__slug={workspace!r}).count())"],
        cwd=ROOT, env=db.env(), check=True, text=True, stdout=subprocess.PIPE,
    ).stdout  # fmt: skip
    if int(check.strip().splitlines()[-1]) >= sessions:
        return None
    log(f"{db.label}: seeding {workspace} ({sessions} sessions x {SEGMENTS} segments)")
    started = time.monotonic()
    rest.manage(db, "seed_demo", "--workspace", workspace, "--sessions", str(sessions), "--segments", str(SEGMENTS),
                "--no-progress")  # fmt: skip
    took = time.monotonic() - started
    log(f"{db.label}: seeded {workspace} in {took:.0f} s")
    return took


def search_path(query: str) -> str:
    return "/api/v1/transcripts/search?" + urllib.parse.urlencode({"query": query})


def one_connection(server: Server, path: str, headers: dict, seconds: float) -> dict:
    r = rest.wrk(server.base, Endpoint("1c", "connect", [path], headers), seconds, 1, 1)
    return {"p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "max_ms": r["max_ms"], "requests": r["requests"],
            "errors": r["non_2xx"] + r["socket_errors"]}  # fmt: skip


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def bench_database(db: Database, args: argparse.Namespace) -> dict:
    out: dict = {"db": db.label}
    rest.manage(db, "migrate", "--noinput", "-v", "0")
    took = seed(db, "bench", 2000)
    if took is not None:
        out["seed_s"] = took
    if "ten" in args.parts:
        seed(db, "solo", TEN_SESSIONS)
    rest.after_seed(db)
    queries = [q for _, q in ROTATION]
    info = search_probe(db, "info", "--workspace", "bench", "--queries", json.dumps(queries + [q for _, q in COMMON_WORDS]))
    out["segments"] = info["segments"]
    out["matches"] = info["matches"]
    auth = {"Authorization": f"Bearer {info['api_key']}"}
    for what, q in ROTATION:
        log(f"  {db.label}: {q!r} ({what}) matches {info['matches'][q]} of {info['segments']} segments "
            f"({100 * info['matches'][q] / max(1, info['segments']):.2f} %)")  # fmt: skip

    if "append" in args.parts:
        out["append"] = search_probe(db, "append", "--segments", "5000", "--appends", str(args.appends))
        log(f"  {db.label}: append at 5,000 segments p50 {out['append']['p50_ms']:.1f} ms, "
            f"{out['append']['statements']} statements")

    servers = {"connect": rest.connect_server(db, args.workers)}
    if args.baseline_root:
        servers["baseline"] = rest.connect_server(db, args.workers, root=args.baseline_root)
    db.probe = {"workspace": {"id": info["workspace"]}, "fts_tables": [{"name": "recordings_segment_fts"}]}
    if db.kind == "sqlite" and "load" in args.parts:
        for workers in args.datasette_workers:
            servers[f"datasette-{workers}p"] = rest.datasette_server(db, workers)
    with contextlib.ExitStack() as stack:
        running = {name: stack.enter_context(server) for name, server in servers.items()}
        connect = running["connect"]
        compared = [running[name] for name in ("connect", "baseline") if name in running]
        for path in [search_path(q) for q in queries]:  # warm the caches the way service would
            for server in compared:
                rest.wrk(server.base, Endpoint("warm", "connect", [path], auth), 1, 1, 1)
        rest.drain(running, limit_s=args.drain)
        if {"rotation", "shapes", "common"} & set(args.parts):
            plan = [(what, q, "rotation") for what, q in ROTATION if "rotation" in args.parts]
            plan += [(what, q, "common") for what, q in COMMON_WORDS if "common" in args.parts]
            plan += [(what, q, "shapes") for what, q in SHAPES if "shapes" in args.parts]
            runs: dict[str, list[dict]] = {q: [] for _, q, _ in plan}
            baseline_runs: dict[str, list[dict]] = {q: [] for _, q, _ in plan}
            for round_ in range(args.rounds):
                for what, q, _ in plan:
                    runs[q].append(one_connection(connect, search_path(q), auth, args.unloaded))
                    if "baseline" in running:
                        baseline_runs[q].append(one_connection(running["baseline"], search_path(q), auth, args.unloaded))
                log(f"  {db.label}: 1-connection round {round_ + 1}/{args.rounds} done")
            out["one_connection"] = [
                {"part": part, "what": what, "query": q, "p50_ms": median_of(runs[q], "p50_ms"),
                 "p99_ms": median_of(runs[q], "p99_ms"), "max_ms": max(r["max_ms"] for r in runs[q]),
                 "errors": sum(r["errors"] for r in runs[q]), "rounds": runs[q],
                 **({"baseline": {"p50_ms": median_of(baseline_runs[q], "p50_ms"),
                                  "p99_ms": median_of(baseline_runs[q], "p99_ms"), "rounds": baseline_runs[q]}}
                    if baseline_runs[q] else {})}
                for what, q, part in plan
            ]  # fmt: skip
        if "load" in args.parts:
            endpoints = [Endpoint("Connect search rotation", "connect", [search_path(q) for q in queries], auth),
                         Endpoint("Connect sessions list (limit=100)", "connect", [SESSIONS_LIST], auth)]
            if "baseline" in running:
                endpoints.append(Endpoint(f"Connect search rotation at {args.baseline} (baseline)", "baseline",
                                          [search_path(q) for q in queries], auth))  # fmt: skip
            if db.kind == "sqlite":
                paths = rest.datasette_search_paths(db, queries)
                endpoints += [Endpoint(f"Datasette FTS search ({w} proc)", f"datasette-{w}p", paths)
                              for w in args.datasette_workers]  # fmt: skip
            load: dict[str, list[dict]] = {e.name: [] for e in endpoints}
            for e in endpoints:
                problem = rest.sanity_check(running[e.server].base, e)
                if problem:
                    raise RuntimeError(f"{e.name}: {problem}")
            for round_ in range(args.rounds):
                for e in endpoints:
                    cpu_before = rest.cpu_seconds(running[e.server].proc.pid) + backends_cpu_seconds(db)
                    r = rest.wrk(running[e.server].base, e, args.duration, args.connections, args.threads)
                    cpu = rest.cpu_seconds(running[e.server].proc.pid) + backends_cpu_seconds(db) - cpu_before
                    r["cpu_ms_per_request"] = 1000 * cpu / max(1, r["requests"])
                    r.pop("wrk_output", None)
                    r["drained_s"] = rest.drain(running, limit_s=args.drain)
                    load[e.name].append(r)
                    log(f"  [{round_ + 1}/{args.rounds}] {e.name}: {r['rps']:.1f} req/s, p50 {r['p50_ms']:.0f} ms, "
                        f"{r['non_2xx'] + r['socket_errors']} errors")  # fmt: skip
            out["load"] = [
                {"endpoint": name, "server": server, "rps": median_of(rs, "rps"), "p50_ms": median_of(rs, "p50_ms"),
                 "p99_ms": median_of(rs, "p99_ms"), "errors": sum(r["non_2xx"] + r["socket_errors"] for r in rs),
                 "cpu_ms_per_request": median_of(rs, "cpu_ms_per_request"),
                 "requests": sum(r["requests"] for r in rs), "rounds": rs}
                for (name, rs), server in zip(load.items(), [e.server for e in endpoints])
            ]  # fmt: skip

    if "ten" in args.parts:
        out["ten"] = ten_workspaces(db, args)
    return out


def backends_cpu_seconds(db: Database) -> float:
    """CPU time used so far by the database's PostgreSQL backends (every server's; the idle
    ones add nothing): with the server's own, the CPU an endpoint costs per request, the figure
    a busy machine disturbs least. 0 on SQLite (in the server's process)."""
    if db.kind != "postgres":
        return 0.0
    import psycopg

    with psycopg.connect(db.url, autocommit=True) as conn:
        pids = [pid for (pid,) in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]  # fmt: skip
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def solo_latency(db: Database, args: argparse.Namespace) -> dict:
    info = search_probe(db, "info", "--workspace", "solo", "--queries", json.dumps([q for _, q in ROTATION]))
    auth = {"Authorization": f"Bearer {info['api_key']}"}
    with rest.connect_server(db, args.workers) as connect:
        for _, q in ROTATION:
            rest.wrk(connect.base, Endpoint("warm", "connect", [search_path(q)], auth), 1, 1, 1)
        runs: dict[str, list[dict]] = {q: [] for _, q in ROTATION}
        for _ in range(args.rounds):
            for _, q in ROTATION:
                runs[q].append(one_connection(connect, search_path(q), auth, args.unloaded))
    return {"segments": info["segments"], "matches": info["matches"],
            "p50_ms": {q: median_of(rs, "p50_ms") for q, rs in runs.items()}}  # fmt: skip


def ten_workspaces(db: Database, args: argparse.Namespace) -> dict:
    """`solo` before and after ten other workspaces of its size join the database. "Before"
    is measured only while the ten do not exist yet (a second run reuses the stored figures)."""
    stored = DATA / f"search-ten-{db.label}.json"
    others = [f"tenant-{i}" for i in range(10)]
    before = json.loads(stored.read_text()) if stored.exists() else None
    if before is None:
        before = solo_latency(db, args)
        stored.write_text(json.dumps(before))
    if args.ten_before_only:
        return {"before": before, "after": before, "ratio": {q: 1.0 for q in before["p50_ms"]}}
    for name in others:
        seed(db, name, TEN_SESSIONS)
    rest.after_seed(db)
    after = solo_latency(db, args)
    ratios = {q: after["p50_ms"][q] / before["p50_ms"][q] for q in before["p50_ms"]}
    return {"before": before, "after": after, "ratio": ratios}


def report(results: list[dict], meta: dict, args: argparse.Namespace) -> str:
    lines = [
        f"Run {meta['started']} on {meta['machine']}; load average before/after {meta['load_before']:.1f}/"
        f"{meta['load_after']:.1f}. Connect on `serve --workers {args.workers}`; medians of {args.rounds} rounds; "
        f"1 connection: `wrk -c1` for {args.unloaded:g} s per query and round; load: `wrk -t{args.threads} "
        f"-c{args.connections}` for {args.duration:g} s per round.",
        "",
    ]
    for r in results:
        seg = r["segments"]
        lines += [f"### {r['db']}: workspace `bench`, {seg:,} segments"
                  + (f" (seeded in {r['seed_s']:.0f} s)" if "seed_s" in r else ""), ""]  # fmt: skip
        if "one_connection" in r:
            baseline = any("baseline" in row for row in r["one_connection"])
            extra = f" baseline p50 / p99 ms ({args.baseline}) |" if baseline else ""
            lines += [f"| part | query | matches | p50 ms | p99 ms | max ms |{extra} target |",
                      f"|---|---|---:|---:|---:|---:|{'---:|' if baseline else ''}---|"]
            for row in r["one_connection"]:
                q = row["query"]
                matches = r["matches"].get(q)
                share = f"{matches:,} ({100 * matches / seg:.2f} %)" if matches is not None else ""
                if row["part"] in ("rotation", "common"):
                    ok = row["p50_ms"] <= TARGET_P50_MS and row["p99_ms"] <= TARGET_P99_MS
                    target = f"p50 ≤ {TARGET_P50_MS:g}, p99 ≤ {TARGET_P99_MS:g}: **{'met' if ok else 'NOT met'}**"
                else:
                    ok = row["max_ms"] <= TARGET_SHAPE_MS and row["p50_ms"] <= TARGET_P50_MS
                    target = (f"p50 ≤ {TARGET_P50_MS:g}, max ≤ {TARGET_SHAPE_MS:g}: "
                              f"**{'met' if ok else 'NOT met'}**")
                shown = q if len(q) <= 40 else f"{q[:37]}… ({len(q)} chars)"
                then = f" {row['baseline']['p50_ms']:.1f} / {row['baseline']['p99_ms']:.1f} |" if baseline else ""
                lines.append(f"| {row['what']} | `{shown}` | {share} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} | "
                             f"{row['max_ms']:.1f} |{then} {target} |")  # fmt: skip
            lines.append("")
        if "load" in r:
            lines += [f"| at {args.connections} connections | req/s | p50 ms | p99 ms | errors | CPU ms per request |",
                      "|---|---:|---:|---:|---:|---:|"]
            for row in r["load"]:
                lines.append(f"| {row['endpoint']} | {row['rps']:.1f} | {row['p50_ms']:.0f} | {row['p99_ms']:.0f} | "
                             f"{row['errors']} of {row['requests']} | {row.get('cpu_ms_per_request', 0):.1f} |")  # fmt: skip
            connect = r["load"][0]
            lines.append("")
            ok = connect["rps"] >= TARGET_RPS
            lines.append(f"- req/s ≥ {TARGET_RPS:g}: {connect['rps']:.1f}, **{'met' if ok else 'NOT met'}**")
            for row in r["load"][1:]:
                ratio = connect["rps"] / row["rps"] if row["rps"] else float("inf")
                if row["endpoint"].startswith("Connect sessions list"):
                    ok = ratio >= TARGET_VS_LIST
                    lines.append(f"- search / {row['endpoint']}: {ratio:.2f}× the req/s (target ≥ {TARGET_VS_LIST:g}×), "
                                 f"**{'met' if ok else 'NOT met'}**")  # fmt: skip
                    if connect.get("cpu_ms_per_request") and row.get("cpu_ms_per_request"):
                        lines.append(f"- the same by CPU per request (list ÷ search, servers and database together; "
                                     f"what an idle machine's req/s would follow when both are CPU-bound): "
                                     f"{row['cpu_ms_per_request'] / connect['cpu_ms_per_request']:.2f}×")  # fmt: skip
                    continue
                if row["server"] == "baseline":
                    lines.append(f"- vs {row['endpoint']}: {ratio:.2f}× the req/s, same rounds")
                    continue
                ok = ratio >= TARGET_VS_DATASETTE
                lines.append(f"- vs {row['endpoint']}: {ratio:.1f}× (target ≥ {TARGET_VS_DATASETTE:g}×), "
                             f"**{'met' if ok else 'NOT met'}**")  # fmt: skip
            lines.append("")
        if "append" in r:
            a = r["append"]
            ok = a["p50_ms"] <= TARGET_APPEND_MS
            lines.append(f"- append one segment to a session of {a['segments_before']:,}: p50 {a['p50_ms']:.1f} ms, "
                         f"p90 {a['p90_ms']:.1f} ms, p99 {a.get('p99_ms', float('nan')):.1f} ms, "
                         f"{a.get('statements', '?')} statements per append (target p50 ≤ {TARGET_APPEND_MS:g}): "
                         f"**{'met' if ok else 'NOT met'}**; "
                         f"found by the next search: {a['last_append_found']}")  # fmt: skip
        if "ten" in r:
            t = r["ten"]
            lines += ["", f"Ten-workspace run: `solo` ({t['before']['segments']:,} segments) alone, then with ten "
                      f"other workspaces of its size in the same database ({r['db']}).", "",
                      "| query | p50 alone ms | p50 with ten others ms | ratio |", "|---|---:|---:|---:|"]  # fmt: skip
            for q, ratio in t["ratio"].items():
                before, after = t["before"]["p50_ms"][q], t["after"]["p50_ms"][q]
                lines.append(f"| `{q}` | {before:.1f} | {after:.1f} | {ratio:.2f} |")
            worst = max(t["ratio"].values())
            lines.append(f"\n- worst ratio {worst:.2f} (target ≤ {TARGET_TEN_RATIO:g}): "
                         f"**{'met' if worst <= TARGET_TEN_RATIO else 'NOT met'}**")  # fmt: skip
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    parser.add_argument("--parts", nargs="+", choices=["rotation", "common", "load", "shapes", "append", "ten"],
                        default=["rotation", "common", "load", "shapes", "append"])  # fmt: skip
    parser.add_argument("--pg-name", default=PG_NAME, help="the PostgreSQL database (created and seeded if missing)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unloaded", type=float, default=4, help="seconds per query and round at 1 connection")
    parser.add_argument("--duration", type=float, default=8, help="seconds per load round")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--drain", type=float, default=10,
                        help="at most this many seconds of waiting for an idle machine between runs")
    parser.add_argument("--ten-before-only", action="store_true",
                        help="ten: measure `solo` alone and stop (seed the ten workspaces yourself, in parallel)")
    parser.add_argument("--datasette-workers", type=int, nargs="*", default=[1, 2],
                        help="Datasette processes per variant; none (the flag alone): Connect and the baseline only")
    parser.add_argument("--baseline", metavar="REF", help="also run Connect at this git commit, side by side")
    args = parser.parse_args()

    DATA.mkdir(parents=True, exist_ok=True)
    run_dir, started = new_run("search")
    load_before = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        args.baseline_root = (stack.enter_context(baseline_worktree(args.baseline, run_dir / "baseline"))
                              if args.baseline else None)
        results = [bench_database(make_database(kind, args.pg_name), args) for kind in args.db]
    meta = {"started": f"{started:%Y-%m-%d %H:%M} UTC", "machine": rest.machine(), "load_before": load_before,
            "load_after": os.getloadavg()[0], "args": vars(args)}  # fmt: skip
    save_results(run_dir, meta, results, report(results, meta, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
