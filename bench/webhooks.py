"""Webhook delivery benchmark (issue 8).

One endpoint on a local receiver, two django-q2 workers (`manage.py qcluster`) plus the sweeper,
events recorded through the real services (`create_session` → `session.created` → Delivery →
django-q2). Measured in the same run, on the same receiver: the ceiling, a plain loop of signed
httpx POSTs. Per database (SQLite with the ORM broker; PostgreSQL with Redis):

- burst: N events recorded with the workers stopped, then the workers started → deliveries/s
  (first to last receipt: the delivery pipeline alone, not the producer), against the ceiling;
- paced: N events at a sustained rate (default 100/s) → event-to-receipt p50/p99;
- kill: a paced run with a worker SIGKILLed halfway through → lost must stay 0;
- fairness (issue 20): four more endpoints whose receiver answers in 9 s (inside the 10 s
  timeout) get a backlog of 1,000 deliveries, then the first endpoint receives a steady trickle
  (2 events/s for 120 s) → its event-to-receipt p50/p99 (target p99 ≤ 15 s), and how many of the
  slow deliveries went meanwhile. The slow backlog is then cancelled, not waited for (at two
  workers and one batch per endpoint it would take an hour).

Lost = events recorded but never received; duplicates = receipts beyond the first per event.
Event-to-receipt runs from just before the event is recorded (`create_session` called) to the
receiver reading the request. The receiver is a process of its own (a threaded HTTP server that
records arrival times on the shared monotonic clock), so neither the producer nor the ceiling's
client shares its interpreter. After each phase the run waits until no delivery is pending or
retrying, at most the queue lease plus the attempt lease plus a minute: a worker killed
mid-batch leaves an attempt lease (60 s) that must expire before the batch is due again.

    CONNECT_DEVELOPMENT=1 .venv/bin/python bench/webhooks.py --db sqlite postgres --events 10000
    CONNECT_DEVELOPMENT=1 .venv/bin/python bench/webhooks.py --db postgres --phases burst fairness
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import descendants, pid_holding_socket, socket_inodes  # noqa: E402

DATABASES = {
    "sqlite": (f"sqlite:///{ROOT / 'bench' / 'data' / 'webhooks.sqlite3'}", ""),
    "postgres": ("postgres://postgres@127.0.0.1:5432/connect_webhooks_bench", "redis://127.0.0.1:6379/3"),
}


class Receiver:
    """A receiver in a subprocess (`--receiver`): records the arrival times of each event (keyed by
    the session id in the body); `GET /_arrivals` returns them, `POST /_reset` forgets them."""

    def __init__(self, delay: float = 0) -> None:
        self.process = subprocess.Popen([sys.executable, __file__, "--receiver", "--receiver-delay", str(delay)],
                                        stdout=subprocess.PIPE, text=True)
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/hook"

    def _control(self, method: str, path: str) -> bytes:
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        connection.request(method, path)
        return connection.getresponse().read()

    def reset(self) -> None:
        self._control("POST", "/_reset")

    def arrivals(self) -> dict[str, list[float]]:
        return json.loads(self._control("GET", "/_arrivals"))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def serve_receiver(delay: float = 0) -> None:
    """Answers 204 to each delivery, `delay` seconds after reading it (a slow receiver)."""
    arrivals: dict[str, list[float]] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def reply(self, status: int, body: bytes = b"") -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            with lock:
                body = json.dumps(arrivals).encode()
            self.reply(200, body)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            now = time.monotonic()
            if self.path == "/_reset":
                with lock:
                    arrivals.clear()
                return self.reply(204)
            payload = json.loads(body)
            event_id = payload.get("data", {}).get("sessionId") or payload["id"]
            with lock:
                arrivals.setdefault(event_id, []).append(now)
            if delay:
                time.sleep(delay)
            self.reply(204)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 256
    print(server.server_address[1], flush=True)
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=server.shutdown).start())
    server.serve_forever()


def ceiling(receiver: Receiver, count: int) -> float:
    """A plain loop of signed POSTs (httpx, one keep-alive connection): requests per second."""
    import httpx
    from nacl.utils import random as random_bytes

    from apps.webhooks import signing

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a log line per request is not the ceiling
    seed = random_bytes(32)
    started = time.monotonic()
    with httpx.Client() as client:
        for i in range(count):
            body = json.dumps({"id": f"evt_ceiling{i}", "type": "session.created", "occurredAt": "x",
                               "data": {"sessionId": f"ceiling-{i}"}}).encode()
            headers = {"Content-Type": "application/json",
                       "Svc-Signature": signing.sign(seed, kid="k", timestamp=int(time.time()), body=body)}
            client.post(receiver.url, content=body, headers=headers).raise_for_status()
    return count / (time.monotonic() - started)


def busiest_worker(cluster_pid: int, receiver_port: int) -> int | None:
    """A cluster process holding a connection to the receiver: a worker mid-attempt."""
    return pid_holding_socket(descendants(cluster_pid), socket_inodes(receiver_port, remote=True))


def run(db: str, args) -> dict:
    database_url, redis_url = DATABASES[db]
    if db == "postgres":  # a database and Redis db of the caller's own on a shared machine
        database_url = f"postgres://postgres@127.0.0.1:5432/{args.postgres_db}"
        redis_url = args.redis_url
    env = {**os.environ, "DATABASE_URL": database_url, "CONNECT_DEVELOPMENT": "1",
           "CONNECT_WEBHOOKS_ALLOW_PRIVATE": "1", "CONNECT_Q_WORKERS": "2", "CONNECT_Q_NAME": f"bench-{db}",
           "CONNECT_WEBHOOK_SWEEP_SECONDS": "1", "DJANGO_SETTINGS_MODULE": "connect.settings"}
    env.pop("REDIS_URL", None)
    if redis_url:
        env["REDIS_URL"] = redis_url
    if db == "sqlite":
        Path(database_url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(database_url[len("sqlite:///"):] + suffix).unlink(missing_ok=True)
    else:
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c",
                        f"drop database if exists {args.postgres_db}"], check=True)
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c",
                        f"create database {args.postgres_db}"], check=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    # This process records events through the services, with the same settings.
    code = f"import sys; sys.argv = {[sys.argv[0], '--child', db] + args.passthrough!r}; run_child()"
    result = subprocess.run([sys.executable, "-c", f"from bench.webhooks import run_child\n{code}"],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    sys.stderr.write(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


PHASES = ["burst", "paced", "kill", "fairness"]
RESULTS = ROOT / "bench" / "results" / f"webhooks-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def save(results: dict) -> None:
    """After every phase, so an interrupted run keeps what it measured."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{results['db']}.json").write_text(json.dumps(results, indent=2))


def run_child() -> None:
    import django

    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--ceiling-requests", type=int, default=3000)
    parser.add_argument("--phases", nargs="+", default=PHASES)
    parser.add_argument("--slow-deliveries", type=int, default=1000)
    parser.add_argument("--slow-seconds", type=float, default=9)
    parser.add_argument("--trickle-rate", type=float, default=2)
    parser.add_argument("--trickle-seconds", type=float, default=120)
    args = parser.parse_args()
    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from apps.recordings import services as recordings
    from apps.tenancy import services as tenancy
    from apps.access.credentials import authenticate_bearer
    from apps.webhooks import keys
    from apps.webhooks import services as webhooks
    from apps.webhooks.models import Delivery

    receiver = Receiver()
    workspace = tenancy.create_workspace(slug="bench")
    member = tenancy.add_member(workspace=workspace, email="bench@example.com")
    key = tenancy.issue_api_key(membership=member, scopes=["svc:sessions:read", "svc:webhooks:write"]).key
    webhooks.create_endpoint(principal=authenticate_bearer(f"Bearer {key}"), name="bench", url=receiver.url,
                             filters=[{"type": "session.created"}])
    keys.active_key()
    port = receiver.port
    results: dict = {"db": connection.vendor, "events": args.events, "rate": args.rate,
                     "load_before": os.getloadavg()[0]}
    results["ceiling_per_s"] = round(ceiling(receiver, args.ceiling_requests), 1)
    drain_limit = settings.CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS + settings.CONNECT_WEBHOOK_LEASE_SECONDS + 60

    def start_workers():
        return (
            subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([sys.executable, "manage.py", "sweep_webhook_deliveries", "--every", "1"],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        )

    cluster = sweeper = None
    try:
        for mode in args.phases:
            receiver.reset()
            if mode == "fairness":
                if cluster is None:
                    cluster, sweeper = start_workers()
                    time.sleep(5)  # the cluster's start is not the phase's latency
                results[mode] = fairness(args, receiver, workspace)
                print(f"{connection.vendor} {mode}: {results[mode]}", file=sys.stderr, flush=True)
                save(results)
                continue
            produced: dict[str, float] = {}
            interval = 0 if mode == "burst" else 1 / args.rate
            killed = None
            phase_started = timezone.now()
            started = time.monotonic()
            for i in range(args.events):
                if interval:
                    delay = started + i * interval - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                at = time.monotonic()
                session = recordings.create_session(workspace=workspace, label=f"{mode} {i}")
                produced[session.id] = at
                if mode == "kill" and i == args.events // 2:
                    # Only a process with a connection to the receiver is a worker (no setproctitle).
                    killed = busiest_worker(cluster.pid, port)
                    if killed:
                        os.kill(killed, signal.SIGKILL)
            produced_until = time.monotonic()
            produce_seconds = produced_until - started
            workers_started = None
            if cluster is None and mode != "burst":
                cluster, sweeper = start_workers()
                time.sleep(5)  # the cluster's start is not the phase's latency
            if cluster is None:  # burst: everything is queued; now let the workers at it
                cluster, sweeper = start_workers()
                workers_started = time.monotonic()
            # Drain: wait until no delivery is pending or retrying (bounded), then count.
            deadline = time.monotonic() + drain_limit
            while time.monotonic() < deadline:
                if not Delivery.objects.filter(status__in=["pending", "retrying"]).exists():
                    break
                time.sleep(0.5)
            settled_s = time.monotonic() - produced_until
            time.sleep(1)
            arrivals = {k: v for k, v in receiver.arrivals().items() if k in produced}
            # Event-to-receipt is meaningful only while the workers run (paced, kill).
            latencies = sorted(v[0] - produced[k] for k, v in arrivals.items()) if mode != "burst" else []
            first = min(v[0] for v in arrivals.values()) if arrivals else started
            last = max(v[0] for v in arrivals.values()) if arrivals else started
            row = {
                "produce_s": round(produce_seconds, 1),
                "produced_per_s": round(len(produced) / produce_seconds, 1),
                "deliveries_per_s": round((len(arrivals) - 1) / (last - first), 1) if len(arrivals) > 1 else 0,
                "p50_ms": round(statistics.median(latencies) * 1000) if latencies else None,
                "p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000) if latencies else None,
                "max_ms": round(latencies[-1] * 1000) if latencies else None,
                "lost": len(produced) - len(arrivals),
                "duplicates": sum(len(v) - 1 for v in arrivals.values()),
                # Last receipt after the last event was recorded (burst: after the workers started).
                "tail_s": round(last - (workers_started or produced_until), 1),
                # Until no delivery was pending or retrying (a killed attempt waits for its lease).
                "settled_s": round(settled_s, 1),
                "statuses": dict(Counter(Delivery.objects.filter(created_at__gte=phase_started)
                                         .values_list("status", flat=True))),
                "killed_pid": killed,
            }
            results[mode] = row
            print(f"{connection.vendor} {mode}: {row}", file=sys.stderr, flush=True)
            save(results)
        results["ceiling_after_per_s"] = round(ceiling(receiver, args.ceiling_requests), 1)
    finally:
        for process in (sweeper, cluster):
            if process is not None:
                process.terminate()
        for process in (sweeper, cluster):
            if process is None:
                continue
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        receiver.stop()
    results["load_after"] = os.getloadavg()[0]
    if "burst" in results:
        results["ratio_to_ceiling"] = round(results["burst"]["deliveries_per_s"] / results["ceiling_per_s"], 2)
    save(results)
    print(json.dumps(results))


def fairness(args, receiver: Receiver, workspace) -> dict:
    """Four endpoints on a receiver answering in `--slow-seconds` with `--slow-deliveries` queued,
    then a trickle of events to the fast endpoint (the one already subscribed in `workspace`):
    its event-to-receipt latencies while the slow backlog is being worked on."""
    from apps.recordings import services as recordings
    from apps.tenancy import services as tenancy
    from apps.access.credentials import authenticate_bearer
    from apps.webhooks import services as webhooks
    from apps.webhooks.models import Delivery

    slow = Receiver(delay=args.slow_seconds)
    try:
        slow_workspace = tenancy.create_workspace(slug="bench-slow")
        member = tenancy.add_member(workspace=slow_workspace, email="slow@example.com")
        key = tenancy.issue_api_key(membership=member, scopes=["svc:sessions:read", "svc:webhooks:write"]).key
        principal = authenticate_bearer(f"Bearer {key}")
        slow_endpoints = [
            webhooks.create_endpoint(principal=principal, name=f"slow {n}", url=f"{slow.url}{n}",
                                     filters=[{"type": "session.created"}])
            for n in range(4)
        ]
        slow_ids = [e.id for e in slow_endpoints]
        queued_at = time.monotonic()
        for i in range(-(-args.slow_deliveries // len(slow_endpoints))):
            recordings.create_session(workspace=slow_workspace, label=f"slow {i}")
        backlog = Delivery.objects.filter(endpoint_id__in=slow_ids).count()

        produced: dict[str, float] = {}
        interval = 1 / args.trickle_rate
        started = time.monotonic()
        for i in range(int(args.trickle_seconds * args.trickle_rate)):
            delay = started + i * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            at = time.monotonic()
            produced[recordings.create_session(workspace=workspace, label=f"trickle {i}").id] = at
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(receiver.arrivals().keys() & produced.keys()) < len(produced):
            time.sleep(0.5)
        arrivals = {k: v for k, v in receiver.arrivals().items() if k in produced}
        latencies = sorted(v[0] - produced[k] for k, v in arrivals.items())
        window_s = time.monotonic() - queued_at
        slow_arrivals = sorted(t for v in slow.arrivals().values() for t in v)
        slow_received = len(slow_arrivals)
        # Each slow endpoint is new, so it may go once ahead of the fast one (it starts at the
        # rotation's current time); after each has had its first batch, the steady state.
        all_started = slow_arrivals[len(slow_endpoints) - 1] if slow_received >= len(slow_endpoints) else None
        steady = sorted(v[0] - produced[k] for k, v in arrivals.items()
                        if all_started is not None and produced[k] >= all_started)
        slow_left = Delivery.objects.filter(endpoint_id__in=slow_ids, status__in=["pending", "retrying"]).count()
        # Not waited for: cancel what is left of the slow backlog (attempts in flight end as
        # lease_lost) so later phases and the next run start clean.
        for endpoint in slow_endpoints:
            webhooks.update_endpoint(endpoint=endpoint, changes={"active": False})
        return {
            "slow_endpoints": len(slow_endpoints), "slow_seconds": args.slow_seconds, "slow_backlog": backlog,
            "trickle_events": len(produced), "trickle_rate": args.trickle_rate,
            "p50_ms": round(statistics.median(latencies) * 1000) if latencies else None,
            "p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000) if latencies else None,
            "max_ms": round(latencies[-1] * 1000) if latencies else None,
            "lost": len(produced) - len(arrivals),
            "duplicates": sum(len(v) - 1 for v in arrivals.values()),
            "steady_events": len(steady),
            "steady_p50_ms": round(statistics.median(steady) * 1000) if steady else None,
            "steady_p99_ms": round(steady[max(0, int(len(steady) * 0.99) - 1)] * 1000) if steady else None,
            "first_slow_batches_s": round(all_started - queued_at, 1) if all_started else None,
            "slow_received_in_window": slow_received, "slow_left": slow_left, "window_s": round(window_s, 1),
        }
    finally:
        slow.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", nargs="+", default=["sqlite", "postgres"], choices=list(DATABASES))
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--phases", nargs="+", default=PHASES, choices=PHASES)
    parser.add_argument("--slow-deliveries", type=int, default=1000, help="fairness: the slow endpoints' backlog")
    parser.add_argument("--slow-seconds", type=float, default=9, help="fairness: the slow receiver's answer time")
    parser.add_argument("--trickle-rate", type=float, default=2, help="fairness: events/s to the fast endpoint")
    parser.add_argument("--trickle-seconds", type=float, default=120, help="fairness: how long the trickle runs")
    parser.add_argument("--postgres-db", default="connect_webhooks_bench", help="dropped and created")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/3")
    parser.add_argument("--receiver", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--receiver-delay", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.receiver:
        return serve_receiver(args.receiver_delay)
    args.passthrough = ["--events", str(args.events), "--rate", str(args.rate), "--phases", *args.phases,
                        "--slow-deliveries", str(args.slow_deliveries), "--slow-seconds", str(args.slow_seconds),
                        "--trickle-rate", str(args.trickle_rate), "--trickle-seconds", str(args.trickle_seconds)]
    rows = [run(db, args) for db in args.db]
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
