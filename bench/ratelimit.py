"""What the rate limit costs per request: the same server and endpoint with the limits on
(defaults) and off (`CONNECT_RATE_LIMIT_PER_CREDENTIAL=0`, `…_PER_WORKSPACE=0`), side by side.

    .venv/bin/python bench/ratelimit.py [--seconds 5] [--rounds 3] [--postgres postgres://…] [--redis redis://…]

Variants: SQLite (counter in the database), and with --postgres, PostgreSQL with the counter in
the database and, with --redis too, in Redis. Each variant: a fresh database (`migrate`,
`seed_demo --sessions 200 --segments 20`), one API key, `manage.py serve --workers 2`, then wrk
(4 threads, 16 connections) on `GET /api/v1/sessions?limit=20`, rounds alternating on/off so
drift on a shared machine hits both. Also the cost of one check in-process (3000 calls, one
thread). Prints a markdown table of median req/s and p50 latency.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def manage(env: dict, *args: str) -> str:
    result = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def prepare(env: dict) -> str:
    manage(env, "migrate", "--no-input", "-v", "0")
    manage(env, "seed_demo", "--workspace", "bench", "--sessions", "200", "--segments", "20")
    out = manage(env, "issue_api_key", "bench", "--member", "demo@example.com", "--scopes", "svc:sessions:read", "--name", "rl")
    return out.strip().splitlines()[-1]


def serve(env: dict, limits_on: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    server_env = {**env, "CONNECT_BASE_URL": f"http://127.0.0.1:{port}"}
    if not limits_on:
        server_env.update(CONNECT_RATE_LIMIT_PER_CREDENTIAL="0", CONNECT_RATE_LIMIT_PER_WORKSPACE="0")
    process = subprocess.Popen(
        [PY, "manage.py", "serve", "--port", str(port), "--workers", "2", "--no-tasks"],
        cwd=ROOT, env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.terminate()
    raise SystemExit("server did not start")


def wrk(url: str, key: str, seconds: int) -> tuple[float, float]:
    result = subprocess.run(
        ["wrk", "-t4", "-c16", f"-d{seconds}s", "--latency", "-H", f"Authorization: Bearer {key}",
         f"{url}/api/v1/sessions?limit=20"],
        capture_output=True, text=True, timeout=seconds + 60,
    )
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", result.stdout).group(1))
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", result.stdout)
    scale = {"us": 0.001, "ms": 1, "s": 1000}[p50.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", result.stdout)
    if non2xx:
        raise SystemExit(f"{non2xx.group(1)} failed responses: the limit was met or the server failed")
    return rps, float(p50.group(1)) * scale


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


def micro(env: dict, key: str) -> float:
    """Microseconds per rate-limit check in one process, one thread (the counter's round trip)."""
    out = manage(env, "shell", "-v", "0", "-c", MICRO.format(key=key))
    return float(out.strip().splitlines()[-1])


def run_variant(name: str, env: dict, seconds: int, rounds: int) -> dict:
    key = prepare(env)
    check_us = micro(env, key)
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(rounds):
        for limits_on in (False, True):
            process, url = serve(env, limits_on)
            try:
                wrk(url, key, 1)  # warm-up: pools filled, code paths hot
                results[limits_on].append(wrk(url, key, seconds))
            finally:
                process.terminate()
                process.wait(timeout=20)
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
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}}
    base.update(CONNECT_DEVELOPMENT="1", DJANGO_SETTINGS_MODULE="connect.settings", LOG_LEVEL="WARNING")
    work = Path(tempfile.mkdtemp(prefix="bench-ratelimit-"))
    variants = [("SQLite, counter in the database", {**base, "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}"})]
    if args.postgres:
        import psycopg

        server_url, _, name = args.postgres.rpartition("/")
        with psycopg.connect(f"{server_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        variants.append(("PostgreSQL, counter in the database", {**base, "DATABASE_URL": args.postgres}))
        if args.redis:
            variants.append(("PostgreSQL, counter in Redis", {**base, "DATABASE_URL": args.postgres, "REDIS_URL": args.redis}))
    rows = [run_variant(name, env, args.seconds, args.rounds) for name, env in variants]
    shutil.rmtree(work, ignore_errors=True)
    print("| variant | one check, µs | req/s limits off | req/s limits on | ratio | p50 ms off | p50 ms on |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        (off_rps, off_p50), (on_rps, on_p50) = row["off"], row["on"]
        print(f"| {row['name']} | {row['check_us']:.0f} | {off_rps:.0f} | {on_rps:.0f} | {on_rps / off_rps:.2f} | {off_p50:.1f} | {on_p50:.1f} |")


if __name__ == "__main__":
    main()
