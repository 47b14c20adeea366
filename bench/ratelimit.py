"""What the rate limit costs per request: the same server and endpoint with the limits on
(defaults) and off (`CONNECT_RATE_LIMIT_PER_CREDENTIAL=0`, `…_PER_WORKSPACE=0`), side by side.

    .venv/bin/python bench/ratelimit.py [--seconds 5] [--rounds 3] [--postgres postgres://…] [--redis redis://…]

Variants: SQLite (counter in the database), and with --postgres, PostgreSQL with the counter in
the database and, with --redis too, in Redis. Each variant: a fresh database (`migrate`,
`seed_demo --sessions 200 --segments 20`), one API key, `manage.py serve --workers 2 --no-tasks`
(bench/harness.py `connect_server`), then wrk (4 threads, 16 connections, the harness's `wrk`)
on `GET /api/v1/sessions?limit=20`, rounds alternating on/off so drift on a shared machine hits
both. Also the cost of one check in-process (3000 calls, one thread). Prints a markdown table of
median req/s and p50 latency.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (  # noqa: E402
    Database,
    Endpoint,
    connect_server,
    manage,
    new_run,
    recreate_postgres_database,
    wrk,
)

LIMITS_OFF = {"CONNECT_RATE_LIMIT_PER_CREDENTIAL": "0", "CONNECT_RATE_LIMIT_PER_WORKSPACE": "0"}


def prepare(db: Database) -> str:
    manage(db, "migrate", "--no-input", "-v", "0")
    manage(db, "seed_demo", "--workspace", "bench", "--sessions", "200", "--segments", "20", capture=True)
    out = manage(db, "issue_api_key", "bench", "--member", "demo@example.com", "--scopes", "svc:sessions:read",
                 "--name", "rl", capture=True)  # fmt: skip
    return out.strip().splitlines()[-1]


def load(base: str, key: str, seconds: int) -> tuple[float, float]:
    endpoint = Endpoint("sessions", "connect", ["/api/v1/sessions?limit=20"], {"Authorization": f"Bearer {key}"})
    run = wrk(base, endpoint, seconds, 16, 4)
    if run["non_2xx"]:
        raise SystemExit(f"{run['non_2xx']} failed responses: the limit was met or the server failed")
    return run["rps"], run["p50_ms"]


MICRO = """
import time
from apps.access.ratelimit import check_rate_limit_sync
from apps.access.credentials import authenticate_bearer
principal = authenticate_bearer("Bearer {key}")
for _ in range(200):
    check_rate_limit_sync(principal)
n = 3000
started = time.perf_counter()
for _ in range(n):
    check_rate_limit_sync(principal)
print((time.perf_counter() - started) / n * 1e6)
"""


def micro(db: Database, key: str) -> float:
    """Microseconds per rate-limit check in one process, one thread (the counter's round trip)."""
    out = manage(db, "shell", "-v", "0", "-c", MICRO.format(key=key), capture=True)
    return float(out.strip().splitlines()[-1])


def run_variant(name: str, db: Database, seconds: int, rounds: int) -> dict:
    key = prepare(db)
    check_us = micro(db, key)
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(rounds):
        for limits_on in (False, True):
            server = connect_server(db, 2, env={} if limits_on else LIMITS_OFF, serve_args=("--no-tasks",),
                                    name=f"ratelimit-{db.label}-{'on' if limits_on else 'off'}")  # fmt: skip
            with server:
                load(server.base, key, 1)  # warm-up: pools filled, code paths hot
                results[limits_on].append(load(server.base, key, seconds))
    return {
        "name": name,
        "check_us": check_us,
        **{
            ("on" if on else "off"): (statistics.median(r for r, _ in rows), statistics.median(p for _, p in rows))
            for on, rows in results.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", help="postgres://… of a database this may drop and recreate")
    parser.add_argument("--redis", help="redis://… for the Redis-counter variant (needs --postgres)")
    args = parser.parse_args()
    new_run("ratelimit")  # the servers' logs go there
    work = Path(tempfile.mkdtemp(prefix="bench-ratelimit-"))
    no_redis = {"REDIS_URL": ""}

    def database(url: str, label: str, extra: dict[str, str], sqlite_path: Path | None = None) -> Database:
        kind = "sqlite" if sqlite_path else "postgres"
        return Database(kind, url, sqlite_path=sqlite_path, label=label, settings="connect.settings", extra_env=extra)

    sqlite_path = work / "db.sqlite3"
    variants = [("SQLite, counter in the database", database(f"sqlite:///{sqlite_path}", "sqlite", no_redis, sqlite_path))]
    if args.postgres:
        server_url, _, name = args.postgres.rpartition("/")
        recreate_postgres_database(name, f"{server_url}/postgres")
        variants.append(("PostgreSQL, counter in the database", database(args.postgres, "postgres", no_redis)))
        if args.redis:
            variants.append(("PostgreSQL, counter in Redis",
                             database(args.postgres, "postgres-redis", {"REDIS_URL": args.redis})))
    rows = [run_variant(name, db, args.seconds, args.rounds) for name, db in variants]
    shutil.rmtree(work, ignore_errors=True)
    print("| variant | one check, µs | req/s limits off | req/s limits on | ratio | p50 ms off | p50 ms on |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        (off_rps, off_p50), (on_rps, on_p50) = row["off"], row["on"]
        print(f"| {row['name']} | {row['check_us']:.0f} | {off_rps:.0f} | {on_rps:.0f} | {on_rps / off_rps:.2f} | {off_p50:.1f} | {on_p50:.1f} |")


if __name__ == "__main__":
    main()
