"""Connect against Connect at another commit, side by side on the same data: "no slower" proofs.

    python bench/ab.py --baseline 9b501a8                    # SQLite, 3 rounds of 8 s per endpoint
    python bench/ab.py --baseline 9b501a8 --db postgres --rounds 5
    python bench/ab.py --baseline 81b8b7d --head-env CONNECT_LOG_FORMAT=json --head-env LOG_LEVEL=INFO
    python bench/ab.py --baseline 3933c29 --baseline main    # three servers: a table per baseline

The servers (`manage.py serve --workers 2`, this checkout and a detached worktree of each REF) run on
one database (`bench/data/ab.sqlite3` or PostgreSQL `connect_ab`, seeded once with
`seed_demo --sessions 300 --segments 500`). Endpoints are loaded with wrk in turn, and within each
endpoint the two servers alternate, the first one swapped every round, so both see the same
neighbours in time on a shared machine; each figure is the median of the rounds. Several
`--baseline`s run in the same rounds (the order rotated every round), a table for each.

Endpoints: the sessions list (limit=100), session get (rotating over every session), the flat
transcript (rotating over the 500-segment ones) and MCP `get_session` (rotating session ids).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (  # noqa: E402
    DATA,
    MCP_POST_LUA,
    RESULTS,
    ROOT,
    Database,
    Endpoint,
    Server,
    baseline_worktree,
    cpu_seconds,
    connect_server,
    ensure_postgres_database,
    log,
    machine,
    manage,
    probe,
    sanity_check,
    wrk,
)

MCP_VERSION = "2025-06-18"

# wrk: POST a rotating JSON-RPC body (one per session id) to /mcp.
def mcp_body(session_id: str, rid: int) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
         "params": {"name": "get_session", "arguments": {"sessionId": session_id}}},
        separators=(",", ":"),
    )  # fmt: skip


def make_database(kind: str, pg_name: str = "connect_ab") -> Database:
    if kind == "sqlite":
        path = DATA / "ab.sqlite3"
        return Database("sqlite", f"sqlite:///{path}", sqlite_path=path, label="sqlite")
    ensure_postgres_database(pg_name)
    return Database("postgres", f"postgres://postgres@127.0.0.1:5432/{pg_name}", label="postgres")


def endpoints(info: dict, key: str) -> list[Endpoint]:
    auth = {"Authorization": f"Bearer {key}"}
    ids = info["session_ids"]
    transcripts = info["transcript_session_ids"][:200]
    mcp_headers = {**auth, "Content-Type": "application/json", "Accept": "application/json",
                   "MCP-Protocol-Version": MCP_VERSION}  # fmt: skip
    return [
        Endpoint("sessions list (limit=100)", "rest", ["/api/v1/sessions?limit=100"], auth, "items=100"),
        Endpoint("session get", "rest", [f"/api/v1/sessions/{i}" for i in ids], auth),
        Endpoint(f"transcript ({info['max_transcript_segments']} segments)", "rest",
                 [f"/api/v1/sessions/{i}/transcript" for i in transcripts], auth,
                 f"transcript={info['max_transcript_segments']}"),  # fmt: skip
        Endpoint("MCP get_session", "mcp", [mcp_body(i, n) for n, i in enumerate(ids)], mcp_headers),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, action="append", metavar="REF", help="repeatable")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--segments", type=int, default=500)
    parser.add_argument(
        "--head-env", action="append", default=[], metavar="NAME=VALUE",
        help="a variable for this checkout's server only (repeatable), e.g. CONNECT_LOG_FORMAT=json LOG_LEVEL=INFO",
    )  # fmt: skip
    parser.add_argument("--only", nargs="+", help="endpoint name substrings to run (e.g. transcript)")
    parser.add_argument("--pg-database", default="connect_ab", help="PostgreSQL database name (default connect_ab)")
    args = parser.parse_args()
    head_env = dict(pair.split("=", 1) for pair in args.head_env)

    DATA.mkdir(parents=True, exist_ok=True)
    run_dir = RESULTS / f"ab-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}"
    run_dir.mkdir(parents=True)
    Server.log_dir = run_dir
    db = make_database(args.db, args.pg_database)
    manage(db, "migrate", "--no-input", "-v", "0")
    info = probe(db)
    if not info.get("workspace") or info["sessions"] < args.sessions:
        log(f"seeding {args.sessions} sessions x {args.segments} segments")
        manage(db, "seed_demo", "--workspace", "bench", "--sessions", str(args.sessions),
               "--segments", str(args.segments), "-v", "0")  # fmt: skip
    info = probe(db, "--issue-key", *(["--checkpoint"] if args.db == "sqlite" else []))
    load_before = os.getloadavg()[0]
    head = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    results: dict[str, dict[str, list[dict]]] = {}
    with contextlib.ExitStack() as stack:
        servers = {head: stack.enter_context(connect_server(db, 2, env=head_env))}
        for n, ref in enumerate(args.baseline):
            root = stack.enter_context(baseline_worktree(ref, run_dir / f"baseline{n or ''}"))
            servers[ref] = stack.enter_context(connect_server(db, 2, root=root))
        eps = endpoints(info, info["api_key"])
        if args.only:
            eps = [e for e in eps if any(o.lower() in e.name.lower() for o in args.only)]
        for ep in eps:
            if ep.server == "rest":
                for name, server in servers.items():
                    problem = sanity_check(server.base, ep)
                    if problem:
                        raise SystemExit(f"{ep.name} at {name}: {problem}")
        order = list(servers)
        for round_ in range(args.rounds):
            for ep in eps:
                shift = round_ % len(order)
                for name in order[shift:] + order[:shift]:
                    mcp = {"lua": MCP_POST_LUA, "path": "/mcp"} if ep.server == "mcp" else {}
                    cpu_before = cpu_seconds(servers[name].proc.pid)
                    run = wrk(servers[name].base, ep, args.duration, args.connections, min(2, args.connections), **mcp)
                    run["cpu_ms_per_request"] = (cpu_seconds(servers[name].proc.pid) - cpu_before) * 1000 / max(1, run["requests"])
                    run.pop("wrk_output", None)
                    results.setdefault(ep.name, {}).setdefault(name, []).append(run)
                    log(f"round {round_ + 1} {ep.name} @ {name}: {run['rps']:.0f} req/s p50 {run['p50_ms']:.1f} ms"
                        f" cpu {run['cpu_ms_per_request']:.2f} ms/req")

    def med(runs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    load_after = os.getloadavg()[0]
    lines = []
    for baseline in args.baseline:
        lines += [
            f"### {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC — {head}"
            f"{''.join(f' {pair}' for pair in args.head_env)} vs {baseline}, {args.db}, "
            f"{args.rounds} rounds × {args.duration:g} s, {args.connections} connections, {len(servers)} servers "
            f"alternating ({machine()}; load average {load_before:.1f} before, {load_after:.1f} after)",
            "",
            f"| endpoint | {head} req/s | {baseline} req/s | ratio | {head} p50 / p99 ms | "
            f"{baseline} p50 / p99 ms | server CPU ms/request {head} / {baseline} (ratio) | non-2xx |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for ep in eps:
            new, old = results[ep.name][head], results[ep.name][baseline]
            errors = sum(r["non_2xx"] for r in new + old)
            lines.append(
                f"| {ep.name} | {med(new, 'rps'):.0f} | {med(old, 'rps'):.0f} | {med(new, 'rps') / med(old, 'rps'):.2f} | "
                f"{med(new, 'p50_ms'):.1f} / {med(new, 'p99_ms'):.1f} | {med(old, 'p50_ms'):.1f} / {med(old, 'p99_ms'):.1f} "
                f"| {med(new, 'cpu_ms_per_request'):.3f} / {med(old, 'cpu_ms_per_request'):.3f} "
                f"({med(new, 'cpu_ms_per_request') / med(old, 'cpu_ms_per_request'):.2f}) | {errors} |"
            )
        lines.append("")
    table = "\n".join(lines)
    (run_dir / "results.md").write_text(table + "\n")
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
