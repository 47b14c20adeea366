"""The short fault cases (issue 20, point 6): each injects one fault while `simulate_activity`
commits events, two resuming streams read them, a signed-webhook receiver takes them and a
background client calls REST and `/mcp`; then the same invariants are checked
(tests/faults/harness.py says which). The long runs are bench/faults.py."""

from __future__ import annotations

import shutil

import httpx
import pytest
from django.db import connection

from tests.faults import harness
from tests.faults.harness import Scenario, describe, wait_until

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the fault suite runs on PostgreSQL + Redis"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="the fault suite starts its own redis-server"),
]


def run_case(stack, name: str, fault, *, receivers=None, cut_attempts_allowed: bool = False,
             sessions: int = 2, segments: int = 4):
    """Open the streams and endpoints, start producing, inject `fault` once events flow, let the
    producer finish, and return the outcome of the invariants."""
    scenario = Scenario(stack, name, receivers=receivers)
    try:
        producer = scenario.produce(sessions=sessions, segments=segments, interval=0.15)
        # Every stream must hold a place in the log before the fault: a reader with no event yet
        # comes back as a new client, owed nothing committed while it was away (the contract
        # resumes from the last id received). The processes dispatch an event each on its own,
        # so the first stream having it says nothing of the other.
        wait_until(lambda: all(r.ids for r in scenario.readers) or producer.failed(),
                   what="the first event on every stream")
        if producer.failed():
            producer.succeeded()  # fails with the producer's output
        note = fault(stack, scenario)
        producer.wait()
        outcome = scenario.check(cut_attempts_allowed=cut_attempts_allowed)
        outcome.notes.append(note)
        if producer.process.returncode != 0:
            outcome.notes.append(f"the producer exited {producer.process.returncode}: {producer.output()[-500:]}")
        print(describe(outcome))
        return outcome
    finally:
        scenario.close()


def test_redis_killed_and_restarted_on_the_same_port(rig):
    outcome = run_case(rig, "redis", harness.redis_kill)
    assert not outcome.violations, describe(outcome)
    assert outcome.events > 0 and outcome.deliveries > 0


def test_the_servers_database_connections_terminated(rig):
    # A terminated connection can cut a drain between its attempts and their record: the
    # receiver may then see those attempts again (counted, reported).
    outcome = run_case(rig, "pg", harness.database_terminate, cut_attempts_allowed=True)
    assert not outcome.violations, describe(outcome)


def test_a_daphne_worker_killed(rig):
    outcome = run_case(rig, "daphne", harness.daphne_kill)
    assert not outcome.violations, describe(outcome)


def test_a_qcluster_worker_killed_mid_attempt(rig):
    # Every request is held 0.5 s, so the worker killed is in the middle of an attempt: that
    # attempt (and the rest of its unrecorded batch) is made again, as at-least-once allows.
    outcome = run_case(rig, "qcluster", harness.qcluster_kill, receivers={"held": harness.hold(0.5)},
                       cut_attempts_allowed=True)
    assert not outcome.violations, describe(outcome)


def test_a_receiver_hanging_past_the_attempt_timeout(rig):
    # The hanging receiver gets every delivery's first request and keeps it past the 2 s
    # timeout: each is attempted again, and the receiver (which did get the first) sees it twice.
    def nothing(stack, scenario):
        return "no fault but the receiver's"

    outcome = run_case(rig, "hang", nothing, cut_attempts_allowed=True,
                       receivers={"hanging": harness.hang_first_attempts(3), "fast": lambda n: 204})
    assert not outcome.violations, describe(outcome)
    assert outcome.webhook_duplicates > 0, "the hanging receiver's first requests were never cut"


def test_slow_receivers_do_not_starve_a_fast_one(rig):
    """Four endpoints whose receiver takes 0.5 s (inside the timeout) hold a backlog of 30
    deliveries each, more than one drain takes at a time; a fast endpoint created after it must
    be served while some of that backlog is still unclaimed. Served globally oldest first, it
    would wait until every older slow delivery had been claimed."""
    from django.db.models import Q
    from django.utils import timezone

    from apps.webhooks.models import Delivery

    slow = {f"slow{i}": harness.hold(0.5) for i in range(4)}
    scenario = Scenario(rig, "fair", receivers=slow, streams=1)
    try:
        scenario.produce(sessions=10, segments=0, interval=0).succeeded()
        fast = scenario.add_endpoint("fast", lambda n: 204)
        scenario.produce(sessions=1, segments=0, interval=0).succeeded()
        fast_deliveries = Delivery.objects.filter(endpoint_id=fast.id)
        slow_ids = [e.id for e in scenario.endpoints if e is not fast]
        slow_due = Delivery.objects.filter(endpoint_id__in=slow_ids, status__in=["pending", "retrying"])
        assert fast_deliveries.exists() and slow_due.exists()
        wait_until(lambda: not fast_deliveries.exclude(status="succeeded").exists(),
                   what="the fast endpoint's deliveries", timeout=150)
        unclaimed = slow_due.filter(Q(lease_until__isnull=True) | Q(lease_until__lt=timezone.now())).count()
        # The slow backlog is not the point: its endpoints are deleted (their deliveries cancel),
        # and the invariants are checked on the fast endpoint.
        for endpoint in [e for e in scenario.endpoints if e is not fast]:
            httpx.delete(f"{rig.url}/api/v1/webhooks/{endpoint.id}", timeout=30,
                         headers={"Authorization": f"Bearer {scenario.key}"})
            endpoint.receiver.close()
            scenario.endpoints.remove(endpoint)
        outcome = scenario.check()
        outcome.notes.append(f"slow deliveries not yet claimed when the fast endpoint was done: {unclaimed}")
        print(describe(outcome))
        assert unclaimed > 0, "the fast endpoint waited until the whole slow backlog had been claimed"
        assert not outcome.violations, describe(outcome)
    finally:
        scenario.close()


def test_overload_is_shed_with_503_and_retry_after(tmp_path):
    """Two processes of two request threads each, a 0.5 s bound on waiting for one, and 24
    concurrent requests that each hold a thread for 1 s: most cannot start in time and must be
    shed at once (503 + Retry-After, the contract's JSON), never queued for seconds; the health
    probe sent in the middle of it is never shed."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.servers import serve

    env = {"CONNECT_QUEUE_TIMEOUT_SECONDS": "0.5", "CONNECT_SYNC_THREADS": "2"}
    with serve(tmp_path, workers=2, env=env) as server, ThreadPoolExecutor(max_workers=24) as pool:
        burst = [pool.submit(httpx.get, f"{server.url}/test/sleep?seconds=1", timeout=60) for _ in range(24)]
        probes = [httpx.get(f"{server.url}/healthz", timeout=30) for _ in range(3)]
        answers = [future.result() for future in burst]
    statuses = sorted(a.status_code for a in answers)
    assert set(statuses) <= {200, 503}, statuses
    shed = [a for a in answers if a.status_code == 503]
    assert shed, f"nothing was shed: {statuses}"
    assert all(a.headers.get("retry-after") and "error" in a.json() for a in shed)
    assert [p.status_code for p in probes] == [200, 200, 200]
