#!/usr/bin/env python3
"""Overload: 200 concurrent clients for 60 s against `serve --workers 2`, with and without
shedding, side by side in one run.

Each client keeps one HTTP/1.1 connection and sends, back to back, a request drawn at random
from the REST mix of bench/rest.py (sessions list, session get, transcript, search) on the same
data (`seed_demo`, bench/rest.py's databases). Every response is timed from the request's first
byte to its last. A `503 {"error":"unavailable"}` is a shed request; every other answer was
admitted. Reported per server: throughput, the share shed, the p50/p99/max of admitted requests
and how many waited past CONNECT_REQUEST_TIMEOUT_SECONDS (10 s).

With `--baseline REF` the same load also runs against Connect at REF (a git worktree of it
under a temporary directory, same data and settings), alternating round by round, so before and
after come from one run on one machine. Results go to bench/results/overload-<time>/ as
results.json and results.md, in bench/rest.py's format.

    python bench/overload.py --quick --baseline 56306b3      # small seed, both servers
    python bench/overload.py --db postgres --duration 60 --clients 200
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import baseline_worktree, new_run, run_line, save_results  # noqa: E402
from bench.rest import (  # noqa: E402
    Database,
    after_seed,
    analyze,
    connect_server,
    log,
    machine,
    make_database,
    prepare,
    probe,
)

SLOW_SECONDS = 10.0  # CONNECT_REQUEST_TIMEOUT_SECONDS's default


def mix(db: Database, key: str) -> tuple[list[str], dict[str, str]]:
    """bench/rest.py's Connect endpoints, one list of paths drawn from at random."""
    info = db.probe
    session_ids = info["session_ids"]
    transcript_ids = info["transcript_session_ids"][:200] or session_ids[:1]
    words = info["search_words"] or ["meeting"]
    queries = words[:4] + ([f"{words[0]} {words[-1]}"] if len(words) > 1 else [])
    paths = ["/api/v1/sessions?limit=100"] * 25
    paths += [f"/api/v1/sessions/{i}" for i in random.choices(session_ids, k=25)]
    paths += [f"/api/v1/sessions/{i}/transcript" for i in random.choices(transcript_ids, k=25)]
    paths += ["/api/v1/transcripts/search?" + urllib.parse.urlencode({"query": q}) for q in random.choices(queries, k=25)]
    return paths, {"Authorization": f"Bearer {key}"}


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, keep-alive) of one HTTP/1.1 response; Content-Length or chunked."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("closed")
    status = int(status_line.split()[1])
    length, chunked, keep = None, False, True
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value:
            chunked = True
        elif name == "connection" and value == "close":
            keep = False
    if chunked:
        body = bytearray()
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                await reader.readline()
                break
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        return status, bytes(body), keep
    if length is not None:
        return status, await reader.readexactly(length), keep
    return status, await reader.read(), False


async def client(port: int, paths: list[str], headers: dict[str, str], until: float, records: list, errors: list) -> None:
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    reader = writer = None
    while time.monotonic() < until:
        path = random.choice(paths)
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}\r\n".encode()
        started = time.monotonic()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            status, body, keep = await read_response(reader)
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            errors.append(type(exc).__name__)
            if writer is not None:
                writer.close()
            reader = writer = None
            await asyncio.sleep(0.05)
            continue
        shed = status == 503 and b'"unavailable"' in body
        records.append((started, time.monotonic() - started, status, shed))
        if not keep:
            writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


def load(port: int, paths: list[str], headers: dict[str, str], clients: int, duration: float) -> dict:
    records: list = []
    errors: list = []

    async def run() -> None:
        until = time.monotonic() + duration
        await asyncio.gather(*(client(port, paths, headers, until, records, errors) for _ in range(clients)))

    started = time.monotonic()
    asyncio.run(run())
    elapsed = time.monotonic() - started
    admitted = sorted(latency for _, latency, status, shed in records if not shed)
    shed = [latency for _, latency, status, is_shed in records if is_shed]
    statuses: dict[str, int] = {}
    for _, _, status, is_shed in records:
        label = "503 shed" if is_shed else str(status)
        statuses[label] = statuses.get(label, 0) + 1

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else 0.0

    return {
        "requests": len(records),
        "rps": len(records) / elapsed,
        "admitted": len(admitted),
        "admitted_rps": len(admitted) / elapsed,
        "shed": len(shed),
        "shed_share": len(shed) / len(records) if records else 0.0,
        "p50_ms": pct(admitted, 0.50),
        "p90_ms": pct(admitted, 0.90),
        "p99_ms": pct(admitted, 0.99),
        "max_ms": admitted[-1] * 1000 if admitted else 0.0,
        "over_10s": sum(1 for v in admitted if v > SLOW_SECONDS),
        "shed_p99_ms": pct(sorted(shed), 0.99),
        "statuses": statuses,
        "socket_errors": len(errors),
    }


def markdown(results: list[dict], meta: dict, args: argparse.Namespace) -> str:
    out = [
        f"{run_line(meta)} {args.clients} clients "
        f"(one keep-alive connection each, back to back) for {args.duration:g} s per round, {args.rounds} round(s), "
        f"servers alternating; Connect on `serve --workers {args.workers}`; REST mix of list, session get, "
        f"transcript and search; data: {meta['data']}. \"admitted\": every answer but a shed 503.",
        "",
        "| DB | server | round | req/s | admitted req/s | shed | admitted p50 ms | p90 ms | p99 ms | max ms "
        "| admitted > 10 s | other statuses | socket errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in results:
        others = ", ".join(f"{k}: {v}" for k, v in sorted(r["statuses"].items()) if k not in ("200", "503 shed"))
        out.append(
            f"| {r['db']} | {r['server']} | {r['round']} | {r['rps']:.0f} | {r['admitted_rps']:.0f} | "
            f"{r['shed_share'] * 100:.1f} % ({r['shed']} of {r['requests']}) | {r['p50_ms']:.0f} | {r['p90_ms']:.0f} | "
            f"{r['p99_ms']:.0f} | {r['max_ms']:.0f} | {r['over_10s']} | {others or '–'} | {r['socket_errors']} |"
        )
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--baseline", metavar="REF", help="also load Connect at this commit, alternating")
    parser.add_argument("--quick", action="store_true", help="bench/rest.py's small seed (50 sessions x 100 segments)")
    parser.add_argument("--sessions", type=int, default=None)
    parser.add_argument("--segments", type=int, default=None)
    parser.add_argument("--no-seed", action="store_true")
    args = parser.parse_args()
    args.sessions = args.sessions or (50 if args.quick else 2000)
    args.segments = args.segments or (100 if args.quick else 500)

    loadavg_before = os.getloadavg()
    run_dir, started = new_run("overload")

    db = make_database(args.db, args.quick)
    seeding = prepare(db, args)
    if seeding is not None:
        if seeding.wait() != 0:
            log("seed_demo failed")
            return 1
        after_seed(db)
    analyze(db)
    db.probe = probe(db, "--issue-key", "--checkpoint")
    key = db.probe.pop("api_key")
    paths, headers = mix(db, key)

    results: list[dict] = []
    with contextlib.ExitStack() as stack:
        servers = {"connect": connect_server(db, args.workers)}
        if args.baseline:
            checkout = Path(tempfile.mkdtemp(prefix="connect-baseline-")) / "connect"
            root = stack.enter_context(baseline_worktree(args.baseline, checkout))
            servers[f"connect at {args.baseline}"] = connect_server(db, args.workers, root=root)
        running = {name: stack.enter_context(server) for name, server in servers.items()}
        for round_ in range(1, args.rounds + 1):
            order = list(running.items())
            if round_ % 2 == 0:
                order.reverse()
            for name, server in order:
                load(server.port, paths, headers, args.clients, min(5.0, args.duration))  # warm-up, discarded
                time.sleep(2)
                result = load(server.port, paths, headers, args.clients, args.duration)
                result |= {"db": db.label, "server": name, "round": round_}
                results.append(result)
                log(
                    f"[{round_}/{args.rounds}] {name}: {result['rps']:.0f} req/s, shed {result['shed_share'] * 100:.1f} %, "
                    f"admitted p99 {result['p99_ms']:.0f} ms (max {result['max_ms']:.0f}), "
                    f"{result['over_10s']} over 10 s, statuses {result['statuses']}, {result['socket_errors']} socket errors"
                )
                time.sleep(2)

    meta = {
        "started": f"{started:%Y-%m-%d %H:%M} UTC",
        "machine": machine(),
        "loadavg_before": loadavg_before,
        "loadavg_after": os.getloadavg(),
        "data": f"{db.label} {db.probe['sessions']} sessions / {db.probe['segments']} segments",
        "args": vars(args),
        "median_p99_ms": {
            name: statistics.median(r["p99_ms"] for r in results if r["server"] == name) for name in {r["server"] for r in results}
        },
    }
    save_results(run_dir, meta, results, markdown(results, meta, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
