"""The fault suite's long runs, on PostgreSQL only (it migrates the database DATABASE_URL names:
use one of its own). Results: bench/README.md and bench/results/.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/connect_faults .venv/bin/python bench/faults.py \
        [--rounds 3] [--sessions 12] [--streams 8] [--only redis,pg,...] [--fairness] [--overload] [--hosts]

Each case starts what tests/faults/harness.py starts (redis-server, `serve --workers 2` with the
task cluster, webhook receivers, SSE readers, a REST + /mcp client, `simulate_activity`), injects
its fault `--rounds` times in a fresh workspace, checks the harness's invariants and prints one
JSON line; a Markdown table ends the run. `--fairness`: a fast endpoint's event-to-receipt lag
beside four endpoints answering in 9 s with a backlog (bound: p99 <= 15 s). `--overload`: 200
clients for 60 s (bound: admitted p99 under CONNECT_REQUEST_TIMEOUT_SECONDS, the excess shed
with 503). `--hosts`: two hosts behind HAProxy (bench/faults_hosts.py), one killed mid-run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("CONNECT_DEVELOPMENT", "1")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench import faults_hosts  # noqa: E402
from bench.faults_report import table  # noqa: E402
from bench.harness import ensure_postgres_database  # noqa: E402
from tests.faults import harness  # noqa: E402
from tests.faults.harness import Outcome, RedisServer, Scenario, Stack, wait_until  # noqa: E402

# name -> (fault, receivers, whether the fault may cut a webhook attempt mid-flight)
CASES = {
    "redis": (harness.redis_kill, None, False),
    "pg": (harness.database_terminate, None, True),
    "daphne": (harness.daphne_kill, None, False),
    "qcluster": (harness.qcluster_kill, {"held": harness.hold(0.5)}, True),
    "hang": (None, {"hanging": harness.hang_first_attempts(3), "fast": lambda n: 204}, True),
    "slow": (None, {**{f"slow{i}": harness.hold(1.5) for i in range(4)}, "fast": lambda n: 204}, False),
}


def run_case(stack: Stack, name: str, args) -> Outcome:
    fault, receivers, cut = CASES[name]
    scenario = Scenario(stack, name, streams=args.streams, receivers=receivers)
    started = time.monotonic()
    try:
        producer = scenario.produce(sessions=args.sessions, segments=args.segments, interval=args.interval)
        # Every stream holds a place in the log before the fault (a reader with no event yet
        # comes back as a new client, owed nothing committed while it was away).
        wait_until(lambda: all(r.ids for r in scenario.readers), what="the first event on every stream")
        notes = []
        for _ in range(args.rounds if fault else 0):
            notes.append(fault(stack, scenario))
            time.sleep(args.gap)
        producer.wait(timeout=1800)
        outcome = scenario.check(cut_attempts_allowed=cut, settle=600)
        outcome.notes += notes
        outcome.faults = len(notes)
        outcome.notes.append(f"{time.monotonic() - started:.0f} s")
        if producer.process.returncode:
            outcome.notes.append(f"producer exited {producer.process.returncode}")
        return outcome
    finally:
        scenario.close()


def _produced(producer) -> None:
    if producer.wait(timeout=1800) != 0:
        raise SystemExit(f"the producer failed (see {producer.log}): {producer.output()[-300:]}")


def fairness(logs: Path, redis: RedisServer, args) -> dict:
    """Backlog first, then live events for a fast endpoint."""
    stack = Stack(logs, redis, CONNECT_WEBHOOK_TIMEOUT_SECONDS="10", CONNECT_WEBHOOK_LEASE_SECONDS="60",
                  CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS="60")
    slow = {f"slow{i}": harness.hold(9) for i in range(4)}
    scenario = Scenario(stack, "fairness", streams=1, receivers=slow, traffic=False)
    try:
        from apps.webhooks.models import Delivery

        # About 3 webhook events a session: 84 sessions x 4 endpoints ≈ 1,000 deliveries.
        _produced(scenario.produce(sessions=args.backlog_sessions, segments=0, interval=0))
        backlog = Delivery.objects.filter(workspace=scenario.workspace, status__in=["pending", "retrying"]).count()
        fast = scenario.add_endpoint("fast", lambda n: 204)
        live_started = time.monotonic()
        _produced(scenario.produce(sessions=args.fast_sessions, segments=2, interval=1))
        fast_rows = Delivery.objects.filter(endpoint_id=fast.id)
        try:
            wait_until(lambda: not fast_rows.exclude(status="succeeded").exists(), what="the fast endpoint",
                       timeout=args.fairness_limit)
        except AssertionError:
            pass  # starved: reported as the deliveries not yet made
        from apps.events.models import Event

        occurred = dict(Event.objects.filter(id__in=fast_rows.values("event_id")).values_list("id", "occurred_at"))
        offset = time.time() - time.monotonic()
        lags = sorted(
            (offset + r.at) - occurred[r.event["id"]].timestamp()
            for r in fast.receiver.requests if r.verified and r.event["id"] in occurred)
        remaining = Delivery.objects.filter(workspace=scenario.workspace, status__in=["pending", "retrying"]).count()
        received = [r.event["id"] for r in fast.receiver.requests if r.verified]
        result = {
            "case": "fairness", "backlog": backlog, "fast deliveries": fast_rows.count(),
            "fast received": len(received), "fast duplicates": len(received) - len(set(received)),
            "fast not delivered": fast_rows.exclude(status="succeeded").count(),
            "lag p50": round(statistics.median(lags), 2) if lags else None,
            "lag p99": round(lags[int(0.99 * (len(lags) - 1))], 2) if lags else None,
            "lag max": round(lags[-1], 2) if lags else None, "slow still due after": remaining,
            "live phase s": round(time.monotonic() - live_started),
        }
        # The rest of the slow backlog would take an hour: stop it by deleting the endpoints.
        for endpoint in scenario.endpoints:
            if endpoint is not fast:
                httpx.delete(f"{stack.url}/api/v1/webhooks/{endpoint.id}", timeout=30,
                             headers={"Authorization": f"Bearer {scenario.key}"})
        return result
    finally:
        scenario.close()
        stack.stop()


async def _overload_clients(url: str, key: str, clients: int, seconds: float) -> list[tuple[float, int | None, bool]]:
    results: list[tuple[float, int | None, bool]] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits,
                                 headers={"Authorization": f"Bearer {key}"}) as client:
        async def one_client(n: int) -> None:
            paths = ["/api/v1/sessions?limit=20", "/api/v1/transcripts/search?query=roadmap"]
            i = n
            while time.monotonic() < deadline:
                i += 1
                started = time.monotonic()
                try:
                    response = await client.get(paths[i % 2])
                    results.append((time.monotonic() - started, response.status_code,
                                    "retry-after" in response.headers))
                except httpx.HTTPError:
                    results.append((time.monotonic() - started, None, False))

        await asyncio.gather(*(one_client(n) for n in range(clients)))
    return results


def overload(logs: Path, redis: RedisServer, args) -> dict:
    """`clients` concurrent clients for `seconds`."""
    stack = Stack(logs, redis)
    scenario = Scenario(stack, "overload", streams=0, receivers={}, traffic=False)
    try:
        scenario.produce(sessions=5, segments=8, interval=0).wait(timeout=600)
        probes: list[int] = []

        async def run() -> list:
            async def probe() -> None:
                end = time.monotonic() + args.overload_seconds
                async with httpx.AsyncClient(timeout=30) as client:
                    while time.monotonic() < end:
                        probes.append((await client.get(f"{stack.url}/healthz")).status_code)
                        await asyncio.sleep(0.5)

            load = _overload_clients(stack.url, scenario.key, args.overload_clients, args.overload_seconds)
            results, _ = await asyncio.gather(load, probe())
            return results

        results = asyncio.run(run())
        admitted = sorted(t for t, status, _ in results if status == 200)
        shed = [r for r in results if r[1] == 503]
        other = [r for r in results if r[1] not in (200, 503)]
        return {
            "case": "overload", "clients": args.overload_clients, "seconds": args.overload_seconds,
            "requests": len(results), "admitted": len(admitted),
            "admitted p50": round(statistics.median(admitted), 3) if admitted else None,
            "admitted p99": round(admitted[int(0.99 * (len(admitted) - 1))], 3) if admitted else None,
            "admitted max": round(admitted[-1], 3) if admitted else None,
            "over 10 s": sum(1 for t in admitted if t > 10),
            "shed 503": len(shed), "shed with Retry-After": sum(1 for r in shed if r[2]),
            "other": dict(__import__("collections").Counter(str(r[1]) for r in other)),
            "healthz not 200": sum(1 for s in probes if s != 200),
        }
    finally:
        scenario.close()
        stack.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(CASES), help="comma-separated cases: " + ",".join(CASES))
    parser.add_argument("--rounds", type=int, default=3, help="faults injected per case")
    parser.add_argument("--gap", type=float, default=4, help="seconds between two faults of a case")
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--segments", type=int, default=8)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--fairness", action="store_true")
    parser.add_argument("--backlog-sessions", type=int, default=84)
    parser.add_argument("--fast-sessions", type=int, default=20)
    parser.add_argument("--fairness-limit", type=float, default=300,
                        help="seconds to wait for the fast endpoint after its last event")
    parser.add_argument("--overload", action="store_true")
    parser.add_argument("--overload-clients", type=int, default=200)
    parser.add_argument("--overload-seconds", type=float, default=60)
    parser.add_argument("--hosts", action="store_true", help="the two-host topology instead (needs root)")
    parser.add_argument("--logs", help="directory for the servers' logs (default: a new temp dir)")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        parser.error("the fault runs need PostgreSQL: set DATABASE_URL")
    # Its own database, created on first use (docs/operations.md names one: connect_faults).
    url = urllib.parse.urlsplit(os.environ["DATABASE_URL"])
    ensure_postgres_database(url.path.lstrip("/"), url._replace(path="/postgres").geturl())
    call_command("migrate", verbosity=0)
    logs = Path(args.logs or tempfile.mkdtemp(prefix="connect-faults-"))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"logs in {logs}", flush=True)
    if args.hosts:
        return faults_hosts.main(logs, args)
    redis = RedisServer(logs)
    outcomes, extra = [], []
    try:
        if args.fairness:
            extra.append(fairness(logs, redis, args))
            print(json.dumps(extra[-1]), flush=True)
        if args.overload:
            extra.append(overload(logs, redis, args))
            print(json.dumps(extra[-1]), flush=True)
        names = [n for n in args.only.split(",") if n] if not (args.fairness or args.overload) else []
        if names:
            stack = Stack(logs, redis)
            try:
                for name in names:
                    outcome = run_case(stack, name, args)
                    outcomes.append(outcome)
                    print(harness.describe(outcome).replace("\n", " "), flush=True)
            finally:
                stack.stop()
    finally:
        redis.stop()
    if outcomes:
        print(table(outcomes))
    return 1 if any(o.violations for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
