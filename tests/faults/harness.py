"""The fault rig: a real stack to break and the invariants to check after each break.

Used by the short cases (tests/faults/) and the long runs (bench/faults.py). Nothing here is
mocked: its own `redis-server` on a free port (no persistence, so a `kill -9` loses what it
held, as a crashed cache does), `manage.py serve --workers 2` with the django-q2 cluster and
the sweeper on PostgreSQL (started by tests/servers.py, on the database the caller's settings
name), webhook receivers that verify every signature against the server's published JWKS
(tests/webhooks/receiver.py), SSE readers that track `id:` lines and reconnect with
`Last-Event-ID`, a background REST + `/mcp` client that records every status, and
`simulate_activity` as the producer, in its own process with the server's environment (so its
commits are announced on the rig's Redis, as a producer in production would).

The invariants (`Scenario.check`), the same after every fault:
- every committed event reached every stream (by event id against the outbox table), live or
  by resume;
- every matching webhook delivery succeeded exactly once (one Delivery row per endpoint and
  event, status succeeded, the receiver saw the event verified); duplicates the receiver saw
  are counted, and must be 0 unless the fault cut an attempt mid-flight or the sender recorded an
  earlier attempt of that event as failed (at least once: its acknowledgement came too late);
- stream slots (in the rig's Redis) equal the streams open, within a lease period;
- outside a fault window every REST, `/mcp` and stream-open answer is 2xx; inside one, only
  503 (with Retry-After) or a dropped connection; never an HTML body.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx

logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns a failure

from bench.harness import pid_holding_socket, socket_inodes
from tests import factories, servers
from tests.redis_server import RedisServer
from tests.servers import ROOT, LiveServer, alive, cmdline_of, descendants, free_port, parent_of, start
from tests.webhooks.receiver import Receiver

STREAM = "/api/v1/events/stream"
JWKS_PATH = "/.well-known/webhook-signing-keys.json"
# What the readers (the stream's default subscription: segment events need a session filter)
# and the endpoints (every subscribable type) take.
STREAM_TYPES = WEBHOOK_TYPES = ("session.created", "session.status_changed")
# Any single wait: generous, since the machine is shared; a passing wait takes seconds.
WAIT = 90
SLOT_LEASE_SECONDS = 5


def rig_env(redis_url: str, app_name: str, **overrides: str) -> dict[str, str]:
    """What the rig's serve, task cluster and producer run with: the rig's Redis, a queue of
    their own, compressed webhook timings (a 2 s attempt timeout, immediate retries, leases
    of seconds), 1 s stream heartbeats, a short stream-slot lease, small database
    pools, and a libpq application name by which `pg_terminate_backend` picks exactly these connections."""
    env = {
        "REDIS_URL": redis_url,
        "PGAPPNAME": app_name,
        "CONNECT_Q_NAME": app_name,
        "CONNECT_Q_WORKERS": "2",
        "CONNECT_WEBHOOKS_ALLOW_PRIVATE": "1",
        "CONNECT_WEBHOOK_RETRY_SCHEDULE": "0,0,0,0,0,0",
        "CONNECT_WEBHOOK_TIMEOUT_SECONDS": "2",
        # Long enough that a batch on a loaded machine records before its lease lapses (a lapsed
        # lease re-queues the batch: duplicates no fault caused); short enough that a killed
        # worker's batch is retried within the cases' waits.
        "CONNECT_WEBHOOK_LEASE_SECONDS": "30",
        "CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS": "4",
        "CONNECT_WEBHOOK_SWEEP_SECONDS": "0.3",
        "CONNECT_SSE_HEARTBEAT_SECONDS": "1",
        "CONNECT_SSE_SLOT_LEASE_SECONDS": str(SLOT_LEASE_SECONDS),
        # Small pools: the rig's load is light and the machine's PostgreSQL is shared.
        "CONNECT_DB_POOL_MIN": "1",
        "CONNECT_DB_POOL_MAX": "6",  # at least CONNECT_SYNC_THREADS (4)
    }
    env.update(overrides)
    return env


# Polls a condition for at most one of the rig's waits.
wait_until = functools.partial(servers.wait_until, timeout=WAIT, every=0.2)


# --- The service ------------------------------------------------------------------------------


class Stack:
    """`serve --workers N` with the task cluster on the caller's database and the rig's Redis."""

    def __init__(self, log_dir: Path, redis: RedisServer, *, workers: int = 2, **overrides: str) -> None:
        self.app_name = f"connect-faults-{os.getpid()}-{free_port()}"
        self.env = rig_env(redis.url, self.app_name, **overrides)
        self.redis, self.log_dir = redis, log_dir
        self.server: LiveServer = start(log_dir, workers=workers, tasks=True, env=self.env)
        self.url = self.server.url
        self._next_producer: Producer | None = Producer(self)  # sets up while the first case opens

    def stop(self) -> None:
        if self._next_producer is not None:
            self._next_producer.process.kill()
            self._next_producer.process.wait(timeout=30)
        self.server.stop()

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def daphne_pids(self) -> list[int]:
        return sorted(pid for pid in descendants(self.server.process.pid)
                      if b"daphne" in cmdline_of(pid) and alive(pid))

    def qcluster_worker_pids(self) -> list[int]:
        """The sentinel's children (workers, monitor, pusher): the children of the task-cluster
        process that has several (as tests/webhooks/test_live.py finds them)."""
        parents: dict[int, list[int]] = {}
        for pid in descendants(self.server.process.pid):
            ppid = parent_of(pid)
            if ppid is not None and b"qcluster" in cmdline_of(pid) and alive(pid):
                parents.setdefault(ppid, []).append(pid)
        if not parents:
            return []
        return max(parents.values(), key=len)

    def terminate_database_connections(self) -> int:
        """`pg_terminate_backend` on every connection of this stack (and its producer)."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()", [self.app_name])
            return cursor.fetchone()[0]

    def database_connections(self) -> int:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [self.app_name])
            return cursor.fetchone()[0]

    def produce(self, slug: str, *, sessions: int = 2, segments: int = 4, interval: float = 0.1) -> "Producer":
        """A producer for `slug`, running now: the one started ahead, if any; another is started
        ahead for the next call."""
        producer, self._next_producer = self._next_producer or Producer(self), Producer(self)
        return producer.start(slug, sessions=sessions, segments=segments, interval=interval)


# A producer process: Django set up first, then `simulate_activity` with the arguments of the
# one line it reads on stdin, as `manage.py` would run it.
PRODUCER = ("import sys, django; django.setup(); from django.core.management import call_command; "
            "call_command('simulate_activity', *sys.stdin.readline().split())")


class Producer:
    """`simulate_activity` in its own process with the stack's environment, under an application
    name of its own: the database fault is the server's, not the producer's (a writer whose
    connection is cut fails its write, as it should; it does not retry blindly).

    Started ahead (`Stack.produce`): the process sets Django up and waits for its arguments, so a
    case's first event does not wait for a Python and Django start on a loaded machine. Until
    then it holds no database or Redis connection. Given a `slug`, it starts at once."""

    def __init__(self, stack: Stack, slug: str | None = None, *, sessions: int = 2, segments: int = 4,
                 interval: float = 0.1) -> None:
        self.log_dir = stack.log_dir
        self.log = stack.log_dir / f"producer-{time.monotonic_ns()}.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", PRODUCER], cwd=ROOT, text=True, stdin=subprocess.PIPE,
                env={**stack.server.env, "PGAPPNAME": f"{stack.app_name}-producer"},
                stdout=out, stderr=subprocess.STDOUT)
        if slug is not None:
            self.start(slug, sessions=sessions, segments=segments, interval=interval)

    def start(self, slug: str, *, sessions: int, segments: int, interval: float) -> "Producer":
        self.log = self.log.rename(self.log_dir / f"producer-{slug}-{time.monotonic_ns()}.log")
        try:
            self.process.stdin.write(f"{slug} --sessions {sessions} --segments {segments} --interval {interval}\n")
            self.process.stdin.close()
        except BrokenPipeError:
            pass  # it exited while setting up: `failed()` and its output say why
        return self

    def wait(self, timeout: float = WAIT * 2) -> int:
        return self.process.wait(timeout=timeout)

    def succeeded(self) -> None:
        """Waits for the producer; a producer that failed fails the case with its output (on a
        shared machine: "too many clients" from PostgreSQL), not as a missing event later."""
        code = self.wait()
        assert code == 0, f"simulate_activity exited {code}: {self.output()[-800:]}"

    def failed(self) -> bool:
        return self.process.poll() not in (None, 0)

    def output(self) -> str:
        return self.log.read_text()


# --- Clients ----------------------------------------------------------------------------------


@dataclass
class Answer:
    started: float
    ended: float
    what: str  # "rest", "mcp", "stream"
    status: int | None  # None: the connection dropped or timed out
    retry_after: bool = False
    html: bool = False


class ResumingReader:
    """A real SSE client on its own thread: reads `id:` lines and, whenever its stream ends or
    is refused, reconnects with `Last-Event-ID` (after 0.3 s), until `close()`."""

    def __init__(self, base_url: str, key: str, *, read_timeout: float = 10, name: str = "") -> None:
        self.base_url, self.key, self.name = base_url, key, name
        self.ids: list[str] = []
        self.answers: list[Answer] = []
        self.connected = False
        self.reconnects = 0
        # Reconnects made before any event was read: with no id to resume from, what was
        # committed meanwhile is not owed to it (a case must let every stream read one first).
        self.reconnects_without_place = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=read_timeout))
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"reader-{name}")
        self._thread.start()

    @property
    def last_id(self) -> str | None:
        with self._lock:
            return self.ids[-1] if self.ids else None

    def seen(self) -> set[str]:
        with self._lock:
            return set(self.ids)

    def duplicates(self) -> int:
        with self._lock:
            return len(self.ids) - len(set(self.ids))

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            if not first:
                self.reconnects += 1
                self.reconnects_without_place += self.last_id is None
                self._stop.wait(0.3)
            first = False
            headers = {"Authorization": f"Bearer {self.key}"}
            if self.last_id:
                headers["Last-Event-ID"] = self.last_id
            started = time.monotonic()
            status = None
            try:
                with self._client.stream("GET", self.base_url + STREAM, headers=headers) as response:
                    self._response = response
                    status = response.status_code
                    answer = Answer(started, time.monotonic(), "stream", status,
                                    "retry-after" in response.headers,
                                    "html" in response.headers.get("content-type", ""))
                    self.answers.append(answer)
                    if status != 200:
                        response.read()
                        continue
                    self.connected = True
                    for line in response.iter_lines():
                        if line.startswith("id:"):
                            with self._lock:
                                self.ids.append(line[3:].strip())
            except (httpx.HTTPError, RuntimeError, ValueError):
                if status is None:
                    self.answers.append(Answer(started, time.monotonic(), "stream", None))
            finally:
                self.connected = False
                self._response = None

    def close(self) -> None:
        self._stop.set()
        self._client.close()
        self._thread.join(timeout=15)


class Traffic:
    """A background REST and `/mcp` client: one request after another, every answer recorded."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url, self.key = base_url, key
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="traffic")
        self._thread.start()

    def _run(self) -> None:
        auth = {"Authorization": f"Bearer {self.key}"}
        mcp_body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "list_sessions", "arguments": {"limit": 5}}}
        with httpx.Client(base_url=self.base_url, timeout=15, headers=auth) as client:
            n = 0
            while not self._stop.is_set():
                n += 1
                what = "rest" if n % 2 else "mcp"
                started = time.monotonic()
                try:
                    if what == "rest":
                        response = client.get("/api/v1/sessions", params={"limit": 5})
                    else:
                        response = client.post("/mcp", json=mcp_body,
                                               headers={"Accept": "application/json, text/event-stream"})
                    self.answers.append(Answer(
                        started, time.monotonic(), what, response.status_code, "retry-after" in response.headers,
                        response.text.lstrip().startswith("<")))
                except httpx.HTTPError:
                    self.answers.append(Answer(started, time.monotonic(), what, None))
                self._stop.wait(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# --- A scenario: one workspace, its streams, endpoints and traffic, and the checks -----------


@dataclass
class Endpoint:
    id: str
    receiver: Receiver
    name: str
    after_event: str = ""  # the workspace's last event when it was created: it gets those after


@dataclass
class Outcome:
    """What one scenario measured; `violations` lists every broken invariant, in words."""

    name: str
    faults: int = 0  # faults injected (a misbehaving receiver is not counted: it is the case)
    events: int = 0
    stream_events_read: int = 0
    deliveries: int = 0
    lost_stream: int = 0
    lost_webhook: int = 0
    stream_duplicates: int = 0
    webhook_duplicates: int = 0
    leaked_slots: int = 0
    answers: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self) -> dict:
        return {"case": self.name, "events": self.events, "deliveries": self.deliveries,
                "lost": self.lost_stream + self.lost_webhook,
                "duplicates": self.webhook_duplicates + self.stream_duplicates,
                "leaked slots": self.leaked_slots, "answers": dict(self.answers),
                "violations": len(self.violations)}


class Scenario:
    """A fresh workspace on a running stack: `streams` resuming readers, one webhook endpoint per
    receiver behaviour, and the background client. `fault()` brackets a fault window."""

    def __init__(self, stack: Stack, name: str, *, streams: int = 2,
                 receivers: dict[str, Callable[[int], object]] | None = None, traffic: bool = True,
                 stream_url: str | None = None, receiver_host: str = "127.0.0.1") -> None:
        self.stack, self.name, self.receiver_host = stack, name, receiver_host
        self.slug = f"f-{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"[:50]
        self.workspace = factories.workspace(self.slug)
        self.member = factories.member(self.workspace, f"ops@{self.slug}.test")
        self.key = factories.api_key(self.member, factories.ALL_SCOPES)
        self.windows: list[list[float]] = []
        self.endpoints: list[Endpoint] = []
        self.readers: list[ResumingReader] = []
        self.traffic: Traffic | None = None
        for receiver_name, behaviour in (receivers or {"fast": lambda n: 204}).items():
            self.add_endpoint(receiver_name, behaviour)
        url = stream_url or stack.url
        self.readers = [ResumingReader(url, self.key, name=f"{name}-{i}") for i in range(streams)]
        try:
            wait_until(lambda: all(r.connected for r in self.readers), what="every stream open")
        except AssertionError as error:
            self.close()
            statuses = Counter(a.status for r in self.readers for a in r.answers)
            raise AssertionError(f"{error}; the stream answered {dict(statuses)}") from None
        self.traffic = Traffic(url, self.key) if traffic else None

    def add_endpoint(self, name: str, behaviour: Callable[[int], object]) -> Endpoint:
        from apps.events.models import Event

        after = Event.objects.filter(workspace=self.workspace).order_by("-id").values_list("id", flat=True).first()
        receiver = Receiver(f"{self.stack.url}{JWKS_PATH}", behaviour, host=self.receiver_host)
        # A sender that gave up (the attempt timed out, its worker was killed) leaves the
        # receiver writing to a closed socket: expected here, not worth a traceback each.
        receiver.server.handle_error = lambda request, client_address: None
        response = httpx.post(f"{self.stack.url}/api/v1/webhooks", timeout=30,
                              headers={"Authorization": f"Bearer {self.key}"},
                              json={"name": name, "url": receiver.url,
                                    "filters": [{"type": t} for t in WEBHOOK_TYPES]})
        assert response.status_code == 201, response.text
        endpoint = Endpoint(response.json()["id"], receiver, name, after or "")
        self.endpoints.append(endpoint)
        return endpoint

    def fault(self) -> "_Window":
        return _Window(self)

    def produce(self, **kwargs) -> Producer:
        return self.stack.produce(self.slug, **kwargs)

    # -- checks --

    def _event_ids(self) -> list[str]:
        from apps.events.models import Event

        return list(Event.objects.filter(workspace=self.workspace, type__in=STREAM_TYPES)
                    .order_by("id").values_list("id", flat=True))

    def _webhook_event_ids(self, endpoint: Endpoint) -> set[str]:
        from apps.events.models import Event

        return set(Event.objects.filter(workspace=self.workspace, type__in=WEBHOOK_TYPES, id__gt=endpoint.after_event)
                   .values_list("id", flat=True))

    def _undelivered(self) -> int:
        from apps.webhooks.models import Delivery

        return Delivery.objects.filter(workspace=self.workspace, status__in=["pending", "retrying"]).count()

    def open_slots(self) -> int:
        """The workspace's live stream slots, in the rig's Redis (as production counts them); a
        Redis that is down holds none (no persistence: it restarts empty)."""
        import redis

        from apps.stream.slots.redis import RedisSlots

        client = redis.Redis.from_url(self.stack.redis.url, socket_timeout=5, socket_connect_timeout=5)
        try:
            return client.zcount(RedisSlots.key(self.workspace.id), int(time.time() * 1000), "+inf")
        except redis.ConnectionError:
            return 0
        finally:
            client.close()

    def check(self, outcome: Outcome | None = None, *, cut_attempts_allowed: bool = False,
              settle: float = WAIT) -> Outcome:
        """Wait (bounded by `settle`) for the streams and deliveries to catch up, then measure
        every invariant. Stops the background client first, so its answers are final."""
        from apps.webhooks.models import Delivery, DeliveryAttempt

        outcome = outcome or Outcome(self.name)
        expected = set(self._event_ids())
        outcome.events = len(expected)

        def streams_caught_up() -> bool:
            return all(expected <= r.seen() for r in self.readers)

        def deliveries_settled() -> bool:
            return self._undelivered() == 0 and all(
                self._webhook_event_ids(e) <= {r.event["id"] for r in e.receiver.requests if r.verified}
                for e in self.endpoints)

        for what, predicate in (("streams to catch up", streams_caught_up), ("deliveries to settle", deliveries_settled)):
            try:
                wait_until(predicate, what=what, timeout=settle)
            except AssertionError as error:
                outcome.violations.append(str(error))
        if self.traffic:
            self.traffic.close()

        for reader in self.readers:
            missing = expected - reader.seen()
            outcome.lost_stream += len(missing)
            outcome.stream_events_read += len(reader.seen() & expected)
            outcome.stream_duplicates += reader.duplicates()
            if missing:
                unplaced = (f" (it reconnected {reader.reconnects_without_place} times before reading any event:"
                            " nothing to resume from)" if reader.reconnects_without_place else "")
                outcome.violations.append(
                    f"stream {reader.name} missed {len(missing)} of {len(expected)} events{unplaced}")
        if outcome.stream_duplicates:
            outcome.notes.append(f"streams read {outcome.stream_duplicates} events twice")

        for endpoint in self.endpoints:
            webhook_events = self._webhook_event_ids(endpoint)
            rows = list(Delivery.objects.filter(endpoint_id=endpoint.id).values_list("event_id", "status"))
            outcome.deliveries += len(rows)
            per_event = Counter(event_id for event_id, _ in rows)
            not_succeeded = [e for e, status in rows if status != "succeeded"]
            missing_rows = webhook_events - set(per_event)
            twice = [e for e, n in per_event.items() if n > 1]
            received = Counter(r.event["id"] for r in endpoint.receiver.requests if r.verified)
            unverified = sum(1 for r in endpoint.receiver.requests if not r.verified)
            lost = webhook_events - set(received)
            duplicates = sum(n - 1 for n in received.values())
            outcome.lost_webhook += len(lost | missing_rows)
            outcome.webhook_duplicates += duplicates
            if not_succeeded or missing_rows or twice or lost or unverified:
                outcome.violations.append(
                    f"endpoint {endpoint.name}: {len(not_succeeded)} deliveries not succeeded, {len(missing_rows)} "
                    f"events without a delivery, {len(twice)} with two, {len(lost)} never received, "
                    f"{unverified} unverified requests")
            if duplicates:
                # At least once (docs/api/webhooks.md): a receiver may see an event again when the
                # sender recorded an earlier attempt of it as failed (its acknowledgement missed
                # the timeout on a loaded machine). Only a second copy nobody recorded as failed
                # is the scheduler's fault.
                repeated = [e for e, n in received.items() if n > 1]
                unexplained = [
                    e for e in repeated
                    if not DeliveryAttempt.objects.filter(
                        delivery__endpoint_id=endpoint.id, delivery__event_id=e).exclude(error="").exists()
                ]
                message = (f"endpoint {endpoint.name}: the receiver saw {duplicates} events twice"
                           f" ({len(repeated) - len(unexplained)} after an attempt recorded as failed)")
                (outcome.violations if unexplained and not cut_attempts_allowed else outcome.notes).append(message)

        self._check_answers(outcome)
        self._check_slots(outcome)
        return outcome

    def _check_answers(self, outcome: Outcome) -> None:
        answers = [a for r in self.readers for a in r.answers] + (self.traffic.answers if self.traffic else [])
        for answer in answers:
            inside = any(a <= answer.ended and answer.started <= b for a, b in self.windows)
            label = f"{answer.what} {answer.status or 'dropped'}{' (in fault)' if inside else ''}"
            outcome.answers[label] += 1
            if answer.html:
                outcome.violations.append(f"{answer.what} answered HTML ({answer.status})")
            elif answer.status is not None and answer.status < 400:
                continue
            elif not inside:
                outcome.violations.append(f"{answer.what} answered {answer.status or 'nothing'} outside a fault")
            elif answer.status not in (None, 503) or (answer.status == 503 and not answer.retry_after):
                outcome.violations.append(f"{answer.what} answered {answer.status} in a fault (only 503 + Retry-After)")
        # One line per kind of violation is enough to read.
        outcome.violations = list(dict.fromkeys(outcome.violations))

    def _check_slots(self, outcome: Outcome) -> None:
        def balanced() -> bool:
            return all(r.connected for r in self.readers) and self.open_slots() == len(self.readers)

        try:
            # A lease period, the renewal before it, and the machine's slack.
            wait_until(balanced, what="slots to equal open streams", timeout=3 * SLOT_LEASE_SECONDS + 20)
        except AssertionError:
            connected = sum(r.connected for r in self.readers)
            outcome.leaked_slots = max(0, self.open_slots() - connected)
            outcome.violations.append(
                f"{self.open_slots()} slots for {connected} open streams after {3 * SLOT_LEASE_SECONDS + 20} s")

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        if self.traffic:
            self.traffic.close()
        for endpoint in self.endpoints:
            endpoint.receiver.close()


class _Window:
    """`with scenario.fault(): …`: the fault window runs from entry until the block ends (the
    block waits for the dependency to be back)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    def __enter__(self) -> "_Window":
        self.scenario.windows.append([time.monotonic(), float("inf")])
        return self

    def __exit__(self, *exc) -> None:
        self.scenario.windows[-1][1] = time.monotonic()


def describe(outcome: Outcome) -> str:
    return json.dumps({**outcome.row(), "violations": outcome.violations, "notes": outcome.notes}, indent=1)


# --- The faults -------------------------------------------------------------------------------
# Each one runs while the scenario's producer is committing events, injects its fault inside a
# fault window, and returns once the service is back (or raises if it never comes back).


def redis_kill(stack: Stack, scenario: Scenario, *, outage: float = 3) -> str:
    """`kill -9` the rig's Redis, keep it down `outage` seconds, restart it on the same port."""
    with scenario.fault():
        stack.redis.kill()
        time.sleep(outage)  # the outage itself: events keep being committed meanwhile
        stack.redis.start()
        wait_until(stack.ready, what="/readyz after Redis came back")
    return f"Redis down {outage:.0f} s"


def database_terminate(stack: Stack, scenario: Scenario) -> str:
    """`pg_terminate_backend` on every connection of the stack (servers, cluster, producer)."""
    with scenario.fault():
        wait_until(lambda: stack.database_connections() > 0, what="the stack's database connections")
        terminated = stack.terminate_database_connections()
        wait_until(stack.ready, what="/readyz after the connections were terminated")
    return f"{terminated} connections terminated"


def daphne_kill(stack: Stack, scenario: Scenario) -> str:
    """SIGKILL one daphne process; `serve` restarts it on its socket."""
    before = stack.daphne_pids()
    assert len(before) >= 2, before
    with scenario.fault():
        os.kill(before[0], signal.SIGKILL)
        wait_until(lambda: len(stack.daphne_pids()) == len(before) and before[0] not in stack.daphne_pids(),
                   what="serve to restart the killed daphne")
        # Ready means the new process accepts too: every process answers /healthz in turn.
        wait_until(lambda: all(_healthz(stack.url) for _ in range(4)), what="/healthz from every process")
    return f"daphne {before[0]} killed"


def _healthz(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def qcluster_kill(stack: Stack, scenario: Scenario) -> str:
    """SIGKILL the django-q2 worker that is in the middle of a webhook attempt (the receiver is
    holding its request), so the attempt is cut mid-flight."""
    endpoint = scenario.endpoints[0]
    count = len(endpoint.receiver.arrivals)
    wait_until(lambda: len(endpoint.receiver.arrivals) > count, what="an attempt in flight")
    port = endpoint.receiver.arrivals[-1]
    with scenario.fault():
        worker = pid_holding_socket(stack.qcluster_worker_pids(), socket_inodes(port))
        if worker is None:
            return "the attempt ended before its worker was found; nothing killed"
        os.kill(worker, signal.SIGKILL)
        wait_until(lambda: len(stack.qcluster_worker_pids()) >= 3, what="the cluster to replace its worker")
    return f"qcluster worker {worker} killed mid-attempt"


def hold(seconds: float) -> Callable[[int], object]:
    """A receiver behaviour: answer 204 after `seconds`."""
    def behaviour(n: int) -> int:
        time.sleep(seconds)
        return 204
    return behaviour


def hang_first_attempts(seconds: float) -> Callable[[int], object]:
    """A receiver behaviour: hold every odd request `seconds` (past the attempt timeout), answer
    the others at once, so each delivery's first attempt times out and its retry succeeds."""
    def behaviour(n: int) -> int:
        if n % 2:
            time.sleep(seconds)
        return 204
    return behaviour
