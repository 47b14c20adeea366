#!/usr/bin/env python3
"""Cost grows with the work, not with the data (issue 24 point 6).

    python bench/scale.py --db postgres --pg-name connect_h_pgsearch_scale --seed-only   # outside the lock
    flock /tmp/bench.lock python bench/scale.py --db postgres --pg-name connect_h_pgsearch_scale

Two databases of ten workspaces each, `scale-0` (the busiest, BUSIEST_SHARE of the sessions) and
`scale-1..9`: SMALL ≈ 300k segments, and LARGE ≈ 3M, which is a copy of SMALL grown tenfold
(PostgreSQL: CREATE DATABASE … TEMPLATE; SQLite: a copy of the file), so that every row of the
small one is in the large one too. Both are seeded once and kept (`--seed-only` seeds and
stops; the seeding runs outside the benchmark lock).

Measured in one run, side by side: one server per size (`serve --workers 2`, the same code),
`scale-0`'s sessions list (limit=100), session get and transcript (rotating over the same 50
sessions, which both databases hold) and search (the rotation of bench/search.py), each alone at
1 connection (`wrk -c1`), sizes alternating endpoint by endpoint and round by round; medians of
the rounds. The target: each endpoint's p50 on LARGE within TARGET_RATIO of its p50 on SMALL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness as rest  # noqa: E402
from bench.harness import DATA, Database, Endpoint, log, new_run, save_results  # noqa: E402
from bench.search import ROTATION, one_connection, search_path, search_probe, seed  # noqa: E402

WORKSPACES = [f"scale-{i}" for i in range(10)]
# Sessions per workspace (each ~750 segments: 500 committed, most also a final revision).
SMALL = {"scale-0": 130, **{w: 30 for w in WORKSPACES[1:]}}  # 400 sessions, ~300k segments
LARGE = {w: n * 10 for w, n in SMALL.items()}  # 4,000 sessions, ~3M segments
TARGET_RATIO = 1.3
SESSIONS_USED = 50  # sessions of scale-0 the get and transcript rotate over
EXTRA_QUERIES = [("two common words", "update have"), ("three common words", "is do update")]


def database(kind: str, pg_name: str, size: str) -> Database:
    if kind == "sqlite":
        path = DATA / f"scale-{size}.sqlite3"
        return Database("sqlite", f"sqlite:///{path}", sqlite_path=path, label=f"sqlite-{size}")
    return Database("postgres", f"postgres://postgres@127.0.0.1:5432/{pg_name}_{size}", label=f"postgres-{size}")


def exists(db: Database) -> bool:
    if db.kind == "sqlite":
        return db.sqlite_path.exists()
    import psycopg

    with psycopg.connect(rest.PG_ADMIN_URL, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db.url.rsplit("/", 1)[1]]).fetchone()
        return row is not None


def copy_database(source: Database, target: Database) -> None:
    log(f"copying {source.label} to {target.label}")
    if source.kind == "sqlite":
        shutil.copyfile(source.sqlite_path, target.sqlite_path)
        return
    import psycopg

    with psycopg.connect(rest.PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{target.url.rsplit("/", 1)[1]}" TEMPLATE "{source.url.rsplit("/", 1)[1]}"')


def seed_sizes(kind: str, pg_name: str, jobs: int) -> tuple[Database, Database]:
    small, large = database(kind, pg_name, "300k"), database(kind, pg_name, "3m")
    if not exists(large):
        if kind == "postgres":
            rest.ensure_postgres_database(small.url.rsplit("/", 1)[1])
        rest.manage(small, "migrate", "--noinput", "-v", "0")
        for workspace, sessions in SMALL.items():
            seed_workspace(small, workspace, sessions, jobs)
        rest.after_seed(small)
        copy_database(small, large)
        for workspace, sessions in LARGE.items():
            seed_workspace(large, workspace, sessions, jobs)
        rest.after_seed(large)
    return small, large


def seed_workspace(db: Database, workspace: str, sessions: int, jobs: int) -> None:
    if jobs == 1:
        seed(db, workspace, sessions)
        return
    rest.manage(db, "seed_demo", "--workspace", workspace, "--sessions", str(sessions), "--segments", "500",
                "--no-progress", "--jobs", str(jobs))  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["postgres"])
    parser.add_argument("--pg-name", default="connect_scale_bench", help="databases <name>_300k and <name>_3m")
    parser.add_argument("--seed-only", action="store_true")
    parser.add_argument("--jobs", type=int, default=2, help="seed_demo worker processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unloaded", type=float, default=3, help="seconds per endpoint, size and round")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    DATA.mkdir(parents=True, exist_ok=True)
    pairs = [seed_sizes(kind, args.pg_name, args.jobs) for kind in args.db]
    if args.seed_only:
        return 0
    run_dir, started = new_run("scale")
    load_before = os.getloadavg()
    results = [measure(small, large, args) for small, large in pairs]
    meta = {"started": f"{started:%Y-%m-%d %H:%M} UTC", "machine": rest.machine(), "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(), "args": vars(args)}  # fmt: skip
    save_results(run_dir, meta, results, report(results, meta, args))
    return 0


def measure(small: Database, large: Database, args: argparse.Namespace) -> dict:
    queries = ROTATION + EXTRA_QUERIES
    for db in (small, large):  # this code's migrations (a database seeded by an older commit)
        rest.manage(db, "migrate", "--noinput", "-v", "0")
    infos = {db.label: search_probe(db, "info", "--workspace", "scale-0", "--sessions", str(SESSIONS_USED))
             for db in (small, large)}  # fmt: skip
    sessions = infos[small.label]["session_ids"]  # the small database's: the large one holds them too
    endpoints = [("sessions list (limit=100)", ["/api/v1/sessions?limit=100"]),
                 ("session get", [f"/api/v1/sessions/{i}" for i in sessions]),
                 ("transcript", [f"/api/v1/sessions/{i}/transcript" for i in sessions])]  # fmt: skip
    endpoints += [(f"search `{q}` ({what})", [search_path(q)]) for what, q in queries]
    runs: dict[str, dict[str, list[dict]]] = {name: {small.label: [], large.label: []} for name, _ in endpoints}
    with contextlib.ExitStack() as stack:
        servers = {db.label: stack.enter_context(rest.connect_server(db, args.workers)) for db in (small, large)}
        for db in (small, large):
            auth = {"Authorization": f"Bearer {infos[db.label]['api_key']}"}
            for name, paths in endpoints:  # warm up, and check the answers
                endpoint = Endpoint("warm", "connect", paths, auth)
                problem = rest.sanity_check(servers[db.label].base, endpoint)
                if problem:
                    raise RuntimeError(f"{db.label} {name}: {problem}")
                rest.wrk(servers[db.label].base, endpoint, 1, 1, 1)
        for round_ in range(args.rounds):
            for name, paths in endpoints:
                order = (small, large) if round_ % 2 == 0 else (large, small)
                for db in order:
                    auth = {"Authorization": f"Bearer {infos[db.label]['api_key']}"}
                    r = rest.wrk(servers[db.label].base, Endpoint(name, "connect", paths, auth), args.unloaded, 1, 1)
                    runs[name][db.label].append({"p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "requests": r["requests"],
                                                 "errors": r["non_2xx"] + r["socket_errors"]})  # fmt: skip
            log(f"  round {round_ + 1}/{args.rounds} done")
    rows = []
    for name, _ in endpoints:
        p50 = {label: statistics.median(r["p50_ms"] for r in rs) for label, rs in runs[name].items()}
        rows.append({"endpoint": name, "small_p50_ms": p50[small.label], "large_p50_ms": p50[large.label],
                     "ratio": p50[large.label] / p50[small.label] if p50[small.label] else float("inf"),
                     "errors": sum(r["errors"] for rs in runs[name].values() for r in rs), "rounds": runs[name]})  # fmt: skip
    return {"db": small.kind, "segments": {small.label: infos[small.label]["segments"],
                                           large.label: infos[large.label]["segments"]},
            "total_segments": {small.label: infos[small.label]["total_segments"],
                               large.label: infos[large.label]["total_segments"]}, "rows": rows}  # fmt: skip


def report(results: list[dict], meta: dict, args: argparse.Namespace) -> str:
    lines = [f"Run {meta['started']} on {meta['machine']}; load average before/after "
             f"{meta['loadavg_before'][0]:.1f}/{meta['loadavg_after'][0]:.1f}. `serve --workers {args.workers}` per "
             f"size, `wrk -c1` for {args.unloaded:g} s per endpoint, size and round; medians of {args.rounds} rounds.", ""]  # fmt: skip
    for r in results:
        small, large = r["total_segments"]  # the two sizes' labels
        lines += [f"### {r['db']}: {r['total_segments'][small]:,} → {r['total_segments'][large]:,} segments in ten "
                  f"workspaces; the busiest (`scale-0`) {r['segments'][small]:,} → {r['segments'][large]:,}",
                  "", f"| endpoint (scale-0) | p50 ms at ~300k | p50 ms at ~3M | ratio (target ≤ {TARGET_RATIO:g}) |",
                  "|---|---:|---:|---:|"]  # fmt: skip
        for row in r["rows"]:
            ok = row["ratio"] <= TARGET_RATIO
            errors = f", {row['errors']} errors" if row["errors"] else ""
            lines.append(f"| {row['endpoint']} | {row['small_p50_ms']:.1f} | {row['large_p50_ms']:.1f} | "
                         f"{row['ratio']:.2f} {'met' if ok else '**NOT met**'}{errors} |")  # fmt: skip
        worst = max(r["rows"], key=lambda row: row["ratio"])
        lines += ["", f"- worst: {worst['endpoint']} at {worst['ratio']:.2f}× "
                      f"(**{'met' if worst['ratio'] <= TARGET_RATIO else 'NOT met'}**)", ""]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
