#!/usr/bin/env python3
"""REST benchmark of Connect against its two references, side by side in one run.

For each database (SQLite file under bench/data/, PostgreSQL database `connect_bench`):
migrate, seed with `seed_demo` unless already seeded, issue an API key, start
`manage.py serve --workers 2` (with bench.settings: production plus the bare-Django view) and,
for SQLite, Datasette on the same file; then run wrk against each endpoint, one after the
other, and write a markdown table plus the raw numbers to bench/results/.

    python bench/rest.py                      # both databases, 15 s per endpoint, 32 connections
    python bench/rest.py --db sqlite --duration 30
    python bench/rest.py --quick              # small seed, 3 s runs: a smoke check of the harness

See bench/README.md for what is measured and the latest results.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (  # noqa: E402 - the shared harness (bench/harness.py)
    DATA,
    PYTHON,
    ROOT,
    Database,
    Endpoint,
    Server,
    after_seed,
    connect_server,
    datasette_search_paths,
    datasette_server,
    drain,
    ensure_postgres_database,
    free_port,
    log,
    machine,
    manage,
    new_run,
    probe,
    run_line,
    sanity_check,
    save_results,
    wrk,
)

# py-spy installs into the virtualenv, which need not be on PATH.
PY_SPY = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(PYTHON).parent))

# Targets from the issue (2-core machine).
# Issue 24: the list ≥ 2× Datasette as shipped (1 process), ≥ 1.5× with 2 processes, ≥ 0.9× the
# bare Django list; session get ≥ 0.9× the bare one-row view, p50 ≤ 2 ms at one connection.
TARGET_LIST_VS_DATASETTE = {1: 2.0, 2: 1.5}
TARGET_LIST_VS_BARE = 0.9
TARGET_GET_VS_BARE = 0.9
TARGET_GET_P50_C1_MS = 2.0
TARGET_TRANSCRIPT_P50_MS = 30.0
TARGET_SEARCH_P50_MS = 50.0
TARGET_EXPORT_VS_JSON = 1.3  # issue 23: an export costs at most 1.3× the JSON of the same transcript


def make_database(label: str, quick: bool, pg_name: str | None = None) -> Database:
    suffix = "_quick" if quick else ""
    if label == "sqlite":
        path = DATA / f"connect{suffix}.sqlite3"
        return Database("sqlite", f"sqlite:///{path}", sqlite_path=path, label=label)
    name = pg_name or f"connect_bench{suffix}"
    ensure_postgres_database(name)
    extra = {"BENCH_DB_POOL": "1"} if label == "postgres-pool" else {}
    return Database("postgres", f"postgres://postgres@127.0.0.1:5432/{name}", label=label, extra_env=extra)


def seeded(db: Database, sessions: int, segments: int) -> bool:
    info = probe(db)
    # seed_demo writes `segments` committed segments per session (plus final revisions).
    return bool(info.get("workspace")) and info["sessions"] >= sessions and info["segments"] >= sessions * segments


def prepare(db: Database, args: argparse.Namespace) -> subprocess.Popen | None:
    """Migrate, then start seeding in the background if needed (returns the process)."""
    log(f"{db.kind}: migrate")
    manage(db, "migrate", "--noinput", "-v", "0")
    if args.no_seed or seeded(db, args.sessions, args.segments):
        log(f"{db.kind}: already seeded (or --no-seed)")
        return None
    log(f"{db.kind}: seeding {args.sessions} sessions x {args.segments} segments (this takes a while)")
    return subprocess.Popen(
        [PYTHON, "manage.py", "seed_demo", "--workspace", "bench",
         "--sessions", str(args.sessions), "--segments", str(args.segments)],
        cwd=ROOT, env=db.env(), stdout=subprocess.DEVNULL,
    )  # fmt: skip


def analyze(db: Database) -> None:
    """Planner statistics before every PostgreSQL run: autovacuum may be off or behind (it is
    off on the bench machine), and plans without statistics are not what service would see."""
    if db.kind == "postgres":
        import psycopg

        with psycopg.connect(db.url, autocommit=True) as conn:
            conn.execute("ANALYZE")


def uvicorn_server(db: Database, workers: int) -> Server:
    """The same Connect ASGI app under uvicorn instead of daphne: an experiment that tells how
    much of the time is the HTTP server's (not a supported way to serve Connect)."""
    port = free_port()
    command = [
        PYTHON, "-m", "uvicorn", "connect.asgi:application", "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--no-access-log", "--log-level", "warning", "--lifespan", "off",
    ]  # fmt: skip
    return Server(f"connect-uvicorn-{db.label}", command, db.env(), port, "/.well-known/oauth-protected-resource")


def gunicorn_server(db: Database, workers: int) -> Server:
    """The same Django project under gunicorn (WSGI, `gthread` workers): an experiment that
    tells what the REST views cost without the ASGI path (see bench/wsgi.py)."""
    port = free_port()
    command = [
        PYTHON, "-m", "gunicorn", "bench.wsgi:application", "--bind", f"127.0.0.1:{port}",
        "--workers", str(workers), "--threads", "4", "--worker-class", "gthread", "--log-level", "warning",
    ]  # fmt: skip
    return Server(f"connect-gunicorn-{db.label}", command, db.env(), port, "/.well-known/oauth-protected-resource")


def profile_during(pids: list[int], seconds: float, out_dir: Path, label: str) -> list[str]:
    """Start py-spy on each worker process for `seconds`; returns the files it will write."""
    files = []
    for pid in pids:
        path = out_dir / f"profile-{label}-{pid}.txt"
        subprocess.Popen(
            [PY_SPY, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--format", "raw",
             "--output", str(path), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        files.append(str(path))
    return files


# --- One database -----------------------------------------------------------------------------


def endpoints_for(db: Database, key: str, args: argparse.Namespace) -> list[Endpoint]:
    info = db.probe
    auth = {"Authorization": f"Bearer {key}"}
    session_ids = info["session_ids"]
    transcript_ids = info["transcript_session_ids"][:200] or session_ids[:1]
    words = info["search_words"] or ["meeting"]
    # A few realistic queries: single words of different frequency and a two-word query.
    queries = words[:4] + [f"{words[0]} {words[-1]}"] if len(words) > 1 else words
    list_size = min(100, info["sessions"])
    eps = [
        Endpoint("sessions list (limit=100)", "connect", ["/api/v1/sessions?limit=100"], auth, f"items={list_size}"),
        Endpoint("bare Django list (no auth)", "connect", ["/bench/bare/sessions"], {}, f"items={list_size}"),
        Endpoint(
            "bare Django list + API-key auth", "connect", ["/bench/bare/sessions-auth"], auth, f"items={list_size}"
        ),
        Endpoint("session get", "connect", [f"/api/v1/sessions/{i}" for i in session_ids], auth),
        Endpoint("bare Django one row (no auth)", "connect", [f"/bench/bare/sessions/{i}" for i in session_ids], {}),
        Endpoint(
            f"transcript ({info['max_transcript_segments']} segments)",
            "connect",
            [f"/api/v1/sessions/{i}/transcript" for i in transcript_ids],
            auth,
            f"transcript={info['max_transcript_segments']}",
        ),
        Endpoint(
            "search",
            "connect",
            ["/api/v1/transcripts/search?" + urllib.parse.urlencode({"query": q}) for q in queries],
            auth,
            "nonempty",
        ),
    ]
    if args.exports:
        eps += export_endpoints(info, auth, transcript_ids)
    if args.uvicorn:
        eps += [
            Endpoint("sessions list (limit=100) [uvicorn]", "connect-uvicorn", ["/api/v1/sessions?limit=100"], auth,
                     f"items={list_size}"),
            Endpoint("bare Django list (no auth) [uvicorn]", "connect-uvicorn", ["/bench/bare/sessions"], {},
                     f"items={list_size}"),
        ]  # fmt: skip
    if args.gunicorn:
        eps += [
            Endpoint(f"{e.name} [gunicorn]", "connect-gunicorn", e.paths, e.headers, e.check)
            for e in eps
            if e.server == "connect" and not e.name.startswith("bare Django list +")
        ]
    if args.stock_handler:
        eps += [
            Endpoint(f"{e.name} [stock handler]", "connect-stock", e.paths, e.headers, e.check)
            for e in eps
            if e.server == "connect" and not e.name.startswith("bare Django list +")
        ]
    if db.kind == "sqlite" and not args.no_datasette:
        ws = info["workspace"]["id"]
        table = f"/{db.sqlite_path.stem}/recordings_session.json?" + urllib.parse.urlencode(
            {"_size": 100, "_sort_desc": "created_at", "workspace_id": ws, "_nocount": 1, "_nofacet": 1}
        )
        search_paths = datasette_search_paths(db, queries)
        for workers in args.datasette_workers:
            server = f"datasette-{workers}p"
            eps.append(Endpoint(f"Datasette table JSON ({workers} proc)", server, [table], {}, f"rows={list_size}"))
            if search_paths:
                eps.append(Endpoint(f"Datasette FTS search ({workers} proc)", server, search_paths, {}, "nonempty"))
    if args.only:
        eps = [e for e in eps if any(o.lower() in e.name.lower() for o in args.only)]
    return eps


def export_endpoints(info: dict, auth: dict[str, str], transcript_ids: list[str]) -> list[Endpoint]:
    """The transcript's formats (issue 23): JSON, VTT and SRT, plain and gzip, rotating over the
    same transcripts as "transcript"; and one transcript polled with its ETag (304) against the
    same one fetched whole."""
    segments = f"{info['max_transcript_segments']} segments"
    paths = [f"/api/v1/sessions/{i}/transcript" for i in transcript_ids]
    gzip_auth = {**auth, "Accept-Encoding": "gzip"}
    eps = []
    for fmt, check in (("json", f"transcript={info['max_transcript_segments']}"), ("vtt", "text=WEBVTT"), ("srt", "text=1\n")):
        query = "" if fmt == "json" else f"?format={fmt}"
        eps.append(Endpoint(f"export {fmt.upper()} ({segments})", "connect", [p + query for p in paths], auth, check))
        eps.append(Endpoint(f"export {fmt.upper()} gzip ({segments})", "connect", [p + query for p in paths], gzip_auth,
                            check))  # fmt: skip
    one = paths[:1]
    eps.append(Endpoint(f"one transcript, full get ({segments})", "connect", one, auth,
                        f"transcript={info['max_transcript_segments']}"))  # fmt: skip
    eps.append(Endpoint(f"one transcript, 304 poll ({segments})", "connect", one,
                        {**auth, "If-None-Match": "{etag}"}, "status=304"))  # fmt: skip
    return eps


def with_etags(base: str, endpoints: list[Endpoint]) -> None:
    """Fill the `{etag}` of conditional endpoints with the tag their path answers now."""
    for e in endpoints:
        if e.headers.get("If-None-Match") == "{etag}":
            headers = {k: v for k, v in e.headers.items() if k != "If-None-Match"}
            with urllib.request.urlopen(urllib.request.Request(base + e.paths[0], headers=headers), timeout=30) as r:
                e.headers["If-None-Match"] = r.headers["ETag"]


def bench_database(db: Database, args: argparse.Namespace, run_dir: Path) -> list[dict]:
    analyze(db)
    db.probe = probe(db, "--issue-key", "--checkpoint")
    key = db.probe.pop("api_key")
    log(
        f"{db.label}: {db.probe['sessions']} sessions, {db.probe['segments']} segments, "
        f"longest flat transcript {db.probe['max_transcript_segments']} segments, "
        f"FTS tables {[t['name'] for t in db.probe['fts_tables']] or '-'}"
    )
    endpoints = endpoints_for(db, key, args)
    servers: dict[str, Server] = {"connect": connect_server(db, args.workers)}
    if args.uvicorn:
        servers["connect-uvicorn"] = uvicorn_server(db, args.workers)
    if args.gunicorn:
        servers["connect-gunicorn"] = gunicorn_server(db, args.workers)
    if args.stock_handler:
        servers["connect-stock"] = connect_server(db, args.workers, stock_handler=True)
    if db.kind == "sqlite" and not args.no_datasette:
        for workers in args.datasette_workers:
            servers[f"datasette-{workers}p"] = datasette_server(db, workers)
    results = []
    # All servers are up together (an idle server costs nothing) and the endpoints are loaded
    # in turn, round after round: on a shared, noisy machine the ratios of neighbours in time
    # are what holds; each figure is the median over the rounds.
    with contextlib.ExitStack() as stack:
        running = {name: stack.enter_context(server) for name, server in servers.items() if any(
            e.server == name for e in endpoints)}
        live = []
        if "connect" in running:
            with_etags(running["connect"].base, endpoints)
        for e in endpoints:
            problem = sanity_check(running[e.server].base, e)
            if problem:
                log(f"  {e.name}: SKIPPED, {problem}")
                results.append({"db": db.label, "endpoint": e.name, "server": e.server, "error": problem})
                continue
            wrk(running[e.server].base, e, args.warmup, args.connections, args.threads)
            drain(running)
            live.append(e)
        runs: dict[str, list[dict]] = {e.name: [] for e in live}
        for round_ in range(1, args.rounds + 1):
            for e in live:
                server = running[e.server]
                profiles = []
                if args.profile and e.server == "connect" and round_ == 1:
                    profiles = profile_during(server.child_pids(), args.duration, run_dir, f"{db.label}-{slug(e.name)}")
                r = wrk(server.base, e, args.duration, args.connections, args.threads)
                r["bytes_per_response"] = r["mb_per_s"] * 1e6 / r["rps"] if r["rps"] else 0.0
                r["drained_s"] = round(drain(running), 2)
                r["profiles"] = profiles
                runs[e.name].append(r)
                log(
                    f"  [{round_}/{args.rounds}] {e.name}: {r['rps']:.0f} req/s, p50 {r['p50_ms']:.1f} ms, "
                    f"p99 {r['p99_ms']:.1f} ms"
                    + (f", {r['non_2xx']} non-2xx" if r["non_2xx"] else "")
                    + (f", {r['socket_errors']} socket errors" if r["socket_errors"] else "")
                )
        for e in live:
            row = {"db": db.label, "endpoint": e.name, "server": e.server, "paths": len(e.paths)}
            row |= aggregate(runs[e.name])
            if args.unloaded and (e.name.startswith(("transcript", "search", "sessions list", "session get"))):
                # Service time without queueing: one connection, one request at a time.
                one = wrk(running[e.server].base, e, args.unloaded, 1, 1)
                drain(running)
                row |= {"p50_c1_ms": one["p50_ms"], "p99_c1_ms": one["p99_ms"], "rps_c1": one["rps"]}
                log(f"  {e.name}, 1 connection: p50 {one['p50_ms']:.1f} ms, p99 {one['p99_ms']:.1f} ms")
            results.append(row)
    return results


def aggregate(runs: list[dict]) -> dict:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    return {
        "rps": median("rps"),
        "p50_ms": median("p50_ms"),
        "p90_ms": median("p90_ms"),
        "p99_ms": median("p99_ms"),
        "mean_ms": median("mean_ms"),
        "requests": sum(r["requests"] for r in runs),
        "bytes_per_response": median("bytes_per_response"),
        "non_2xx": sum(r["non_2xx"] for r in runs),
        "socket_errors": sum(r["socket_errors"] for r in runs),
        "rounds": runs,
    }


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:40]


# --- Report -----------------------------------------------------------------------------------


def find(results: list[dict], db: str, prefix: str) -> dict | None:
    """The measured row, or None when it was not measured or more than 1 % of it failed (its
    req/s then counts fast failures, and no target can be judged on it)."""
    row = next((r for r in results if r["db"] == db and r["endpoint"] == prefix and "rps" in r), None)
    row = row or next((r for r in results if r["db"] == db and r["endpoint"].startswith(prefix) and "rps" in r
                       and "[" not in r["endpoint"]), None)  # fmt: skip
    if row and (row["non_2xx"] + row["socket_errors"]) > 0.01 * max(1, row["requests"]):
        return None
    return row


def unloaded(row: dict) -> str:
    return f" (1 connection: p50 {row['p50_c1_ms']:.1f} ms)" if "p50_c1_ms" in row else ""


def verdicts(results: list[dict], args: argparse.Namespace) -> list[str]:
    lines = []
    for db in sorted({r["db"] for r in results}):
        lst = find(results, db, "sessions list")
        bare = find(results, db, "bare Django list (no auth)")
        if lst and bare:
            ratio = lst["rps"] / bare["rps"]
            ok = "met" if ratio >= TARGET_LIST_VS_BARE else "NOT met"
            lines.append(
                f"- {db}: sessions list / bare Django = {ratio:.2f} (target ≥ {TARGET_LIST_VS_BARE:.2f}): **{ok}**"
            )
        for workers in args.datasette_workers:
            ds = find(results, db, f"Datasette table JSON ({workers} proc)")
            if lst and ds:
                ratio = lst["rps"] / ds["rps"]
                target = TARGET_LIST_VS_DATASETTE.get(workers, 1.0)
                ok = "met" if ratio >= target else "NOT met"
                lines.append(
                    f"- {db}: sessions list / Datasette table JSON ({workers} proc) = {ratio:.2f} "
                    f"(target ≥ {target:.2f}): **{ok}**"
                )
        get, one_row = find(results, db, "session get"), find(results, db, "bare Django one row")
        if get and one_row:
            ratio = get["rps"] / one_row["rps"]
            ok = "met" if ratio >= TARGET_GET_VS_BARE else "NOT met"
            lines.append(f"- {db}: session get / bare Django one row = {ratio:.2f} (target ≥ {TARGET_GET_VS_BARE:.2f}): "
                         f"**{ok}**")  # fmt: skip
        if get and "p50_c1_ms" in get:
            ok = "met" if get["p50_c1_ms"] <= TARGET_GET_P50_C1_MS else "NOT met"
            lines.append(f"- {db}: session get p50 at 1 connection = {get['p50_c1_ms']:.1f} ms "
                         f"(target ≤ {TARGET_GET_P50_C1_MS:.0f} ms): **{ok}**")  # fmt: skip
        tr = find(results, db, "transcript")
        if tr:
            ok = "met" if tr["p50_ms"] <= TARGET_TRANSCRIPT_P50_MS else "NOT met"
            lines.append(
                f"- {db}: transcript p50 at {args.connections} connections = {tr['p50_ms']:.1f} ms "
                f"(target ≤ {TARGET_TRANSCRIPT_P50_MS:.0f} ms): **{ok}**{unloaded(tr)}"
            )
        json_export = find(results, db, "export JSON (")
        for fmt in ("VTT", "SRT"):
            export = find(results, db, f"export {fmt} (")
            if json_export and export:
                cost = json_export["rps"] / export["rps"]
                ok = "met" if cost <= TARGET_EXPORT_VS_JSON else "NOT met"
                lines.append(f"- {db}: {fmt} export costs {cost:.2f}× the JSON of the same transcripts "
                             f"(target ≤ {TARGET_EXPORT_VS_JSON:.1f}×): **{ok}**")  # fmt: skip
        for fmt in ("JSON", "VTT", "SRT"):
            plain, packed = find(results, db, f"export {fmt} ("), find(results, db, f"export {fmt} gzip (")
            if plain and packed:
                lines.append(f"- {db}: {fmt} gzip: {packed['bytes_per_response'] / plain['bytes_per_response']:.2f}× the "
                             f"bytes at {packed['rps'] / plain['rps']:.2f}× the req/s of plain")  # fmt: skip
        full, poll = find(results, db, "one transcript, full get"), find(results, db, "one transcript, 304 poll")
        if full and poll:
            lines.append(f"- {db}: a 304 poll does {poll['rps'] / full['rps']:.2f}× the req/s of a full get "
                         f"({poll['bytes_per_response']:.0f} against {full['bytes_per_response']:.0f} bytes)")  # fmt: skip
        se = find(results, db, "search")
        if se:
            ok = "met" if se["p50_ms"] <= TARGET_SEARCH_P50_MS else "NOT met"
            lines.append(
                f"- {db}: search p50 at {args.connections} connections = {se['p50_ms']:.1f} ms "
                f"(target ≤ {TARGET_SEARCH_P50_MS:.0f} ms): **{ok}**{unloaded(se)}"
            )
        for r in results:
            if r["db"] == db and r.get("non_2xx", 0) + r.get("socket_errors", 0):
                lines.append(
                    f"- {db}: {r['endpoint']}: {r['non_2xx']} non-2xx responses and {r['socket_errors']} socket "
                    f"errors in {r['requests']} requests: its req/s counts failures too"
                )
            if r["db"] == db and "error" in r:
                lines.append(f"- {db}: {r['endpoint']}: not measured ({r['error']})")
    return lines


def markdown(results: list[dict], meta: dict, args: argparse.Namespace) -> str:
    out = [
        f"{run_line(meta)} wrk -t{args.threads} -c{args.connections}, "
        f"{args.rounds} round(s) of {args.duration:g} s per endpoint after a {args.warmup:g} s warm-up, medians "
        f"over the rounds; Connect on `serve --workers {args.workers}`; data: {meta['data']}. "
        f"\"1 conn\": the same endpoint with one connection for {args.unloaded:g} s (service time, no queueing).",
        "",
        "| DB | endpoint | server | req/s | p50 ms | p90 ms | p99 ms | p50 ms, 1 conn | bytes/response | errors |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if "rps" in r:
            one = f"{r['p50_c1_ms']:.1f}" if "p50_c1_ms" in r else ""
            errors = r["non_2xx"] + r["socket_errors"]
            out.append(
                f"| {r['db']} | {r['endpoint']} | {r['server']} | {r['rps']:.0f} | {r['p50_ms']:.1f} | "
                f"{r['p90_ms']:.1f} | {r['p99_ms']:.1f} | {one} | {r['bytes_per_response']:.0f} | "
                f"{errors} of {r['requests']} |"
            )
        else:
            out.append(f"| {r['db']} | {r['endpoint']} | {r['server']} | – | – | – | – | – | – | {r['error']} |")
    out += ["", *verdicts(results, args)]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", nargs="+", choices=["sqlite", "postgres", "postgres-pool", "both"], default=["both"],
                        help="postgres-pool: the PostgreSQL database again, with psycopg's pool (bench/settings.py)")
    parser.add_argument("--duration", type=float, default=None,
                        help="seconds per endpoint and round (default 10; 3 with --quick)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds over all endpoints (default 3; 1 with --quick)")
    parser.add_argument("--unloaded", type=float, default=None,
                        help="seconds of a 1-connection run for list, transcript and search (default 5; 0 = none)")
    parser.add_argument("--warmup", type=float, default=None, help="seconds of discarded load first (default 3)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--workers", type=int, default=2, help="daphne processes (serve --workers)")
    parser.add_argument("--datasette-workers", type=int, nargs="+", default=[1, 2],
                        help="Datasette process counts to measure (1 = the datasette command as shipped)")
    parser.add_argument("--sessions", type=int, default=None, help="default 2000 (50 with --quick)")
    parser.add_argument("--segments", type=int, default=None, help="per session; default 500 (100 with --quick)")
    parser.add_argument("--quick", action="store_true", help="small seed in separate databases, short runs")
    parser.add_argument("--no-seed", action="store_true", help="use the databases as they are")
    parser.add_argument("--no-datasette", action="store_true")
    parser.add_argument("--gunicorn", action="store_true",
                        help="also serve the Connect endpoints with gunicorn (WSGI, same workers, 4 threads each)")
    parser.add_argument("--stock-handler", action="store_true",
                        help="also serve Connect with Django's stock ASGIHandler (a thread per request)")
    parser.add_argument("--uvicorn", action="store_true",
                        help="also serve Connect with uvicorn (same app and workers) for the list endpoints")
    parser.add_argument("--only", nargs="+", help="endpoint name substrings to run (e.g. list search)")
    parser.add_argument("--exports", action="store_true",
                        help="also the transcript as JSON, VTT and SRT, plain and gzip, and a 304 poll against a full get")
    parser.add_argument("--pg-database", default=None,
                        help="PostgreSQL database name (default connect_bench, connect_bench_quick with --quick)")
    parser.add_argument("--profile", action="store_true", help="py-spy the daphne workers during each Connect run")
    args = parser.parse_args()
    args.duration = args.duration or (3 if args.quick else 10)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.unloaded = args.unloaded if args.unloaded is not None else (2 if args.quick else 5)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    args.sessions = args.sessions or (50 if args.quick else 2000)
    args.segments = args.segments or (100 if args.quick else 500)

    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get update && apt-get install -y wrk", file=sys.stderr)
        return 2
    if args.profile and PY_SPY is None:
        print("py-spy is not installed: pip install -r bench/requirements.txt", file=sys.stderr)
        return 2
    try:
        import datasette  # noqa: F401
    except ImportError:
        if not args.no_datasette:
            print("Datasette is not installed: pip install -r bench/requirements.txt", file=sys.stderr)
            return 2

    DATA.mkdir(parents=True, exist_ok=True)
    loadavg_before = os.getloadavg()
    run_dir, started = new_run("rest")
    kinds = list(dict.fromkeys(k for d in args.db for k in (["sqlite", "postgres"] if d == "both" else [d])))
    dbs = [make_database(k, args.quick, args.pg_database) for k in kinds]

    # Seed every database at once (the seeders are mostly single-threaded: two cores, two DBs).
    seeding: dict[str, tuple[Database, subprocess.Popen | None]] = {}
    for db in dbs:
        if db.url not in seeding:  # postgres and postgres-pool share one database
            seeding[db.url] = (db, prepare(db, args))
    for db, proc in seeding.values():
        kind = db.kind
        if proc is not None:
            t0 = time.monotonic()
            if proc.wait() != 0:
                log(f"{kind}: seed_demo failed ({proc.returncode})")
                return 1
            log(f"{kind}: seeded ({time.monotonic() - t0:.0f} s after the wait began)")
            after_seed(db)

    results: list[dict] = []
    for db in dbs:
        results += bench_database(db, args, run_dir)

    meta = {
        "started": f"{started:%Y-%m-%d %H:%M} UTC",
        "machine": machine(),
        "loadavg_before": loadavg_before,
        "loadavg_after": os.getloadavg(),
        "data": ", ".join(
            f"{db.label} {db.probe['sessions']} sessions / {db.probe['segments']} segments" for db in dbs
        ),
        "args": vars(args),
    }
    table = markdown(results, meta, args)
    save_results(run_dir, meta, results, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
