"""End to end on a live `serve` (daphne + django-q2 cluster + sweeper; the ORM broker on
SQLite, Redis when REDIS_URL is set): events recorded by the services reach a real receiver
that verifies every signature against the JWKS fetched over HTTP from the live server."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from apps.webhooks import keys
from apps.webhooks.models import Delivery
from bench.harness import pid_holding_socket, tcp_sockets
from tests import factories
from tests.servers import cmdline_of, descendants, parent_of
from tests.webhooks.conftest import wait_until
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_receiver(webhook_server, webhook_settings):
    receiver = Receiver(f"{webhook_server.url}/.well-known/webhook-signing-keys.json")
    receiver.doc.MIN_REFRESH_SECONDS = 0  # refetch at once on an unknown kid (rotation test)
    yield receiver
    receiver.close()


def subscribe(webhook_server, membership, url, filters=None) -> str:
    key = factories.api_key(membership, factories.ALL_SCOPES)
    with webhook_server.client(headers={"Authorization": f"Bearer {key}"}) as client:
        response = client.post("/api/v1/webhooks", json={
            "name": "live", "url": url, "filters": filters or [{"type": "session.created"}]})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def settled(**filters):
    return lambda: not Delivery.objects.filter(status__in=["pending", "retrying"], **filters).exists()


def test_recorded_events_are_delivered_signed_and_verified(webhook_server, live_receiver, alice):
    endpoint_id = subscribe(webhook_server, alice, live_receiver.url, [
        {"type": "session.status_changed", "status": ["completed"]}, {"type": "session.created"}])
    session = factories.session(alice.workspace, completed=True)  # created, then recording → completed
    requests = live_receiver.wait_for(2)
    assert all(r.verified for r in requests)
    by_type = {r.event["type"]: r for r in requests}
    assert by_type["session.created"].event["data"]["sessionId"] == session.id
    changed = by_type["session.status_changed"].event["data"]
    assert (changed["status"], changed["previousStatus"]) == ("completed", "recording")
    assert set(by_type["session.created"].event) == {"id", "type", "occurredAt", "data"}
    wait_until(settled(endpoint_id=endpoint_id))
    assert set(Delivery.objects.filter(endpoint_id=endpoint_id).values_list("status", flat=True)) == {"succeeded"}


def test_500s_until_dead_letter_after_exactly_seven_attempts_then_replay(webhook_server, live_receiver, alice):
    live_receiver.behaviour = lambda n: 500 if n <= 7 else 204
    endpoint_id = subscribe(webhook_server, alice, live_receiver.url)
    factories.session(alice.workspace)
    wait_until(lambda: Delivery.objects.filter(endpoint_id=endpoint_id, status="dead_letter").first())
    delivery = Delivery.objects.get(endpoint_id=endpoint_id)
    assert (delivery.attempt_count, delivery.stop_reason) == (7, "max_attempts")
    assert len(live_receiver.requests) == 7 and all(r.verified for r in live_receiver.requests)
    assert len({r.headers["Svc-Delivery-Id"] for r in live_receiver.requests}) == 1

    key = factories.api_key(alice, factories.ALL_SCOPES)
    with webhook_server.client(headers={"Authorization": f"Bearer {key}"}) as client:
        replay = client.post(f"/api/v1/webhook-deliveries/{delivery.id}/replay")
        assert replay.status_code == 202
        [eighth] = live_receiver.wait_for(8)[7:]
        assert eighth.headers["Svc-Event-Id"] == delivery.event_id
        assert eighth.headers["Svc-Delivery-Id"] == replay.json()["id"] != delivery.id
        wait_until(lambda: client.get(f"/api/v1/webhook-deliveries/{replay.json()['id']}").json()["status"]
                   == "succeeded")
        test = client.post(f"/api/v1/webhooks/{endpoint_id}/test")
        assert test.status_code == 202
        wait_until(lambda: client.get(f"/api/v1/webhook-deliveries/{test.json()['id']}").json()["attemptCount"] == 1)
    assert live_receiver.wait_for(9)[8].event["type"] == "webhook.test"


def test_key_rotation_mid_stream_old_kid_still_verifies(webhook_server, live_receiver, alice):
    subscribe(webhook_server, alice, live_receiver.url)
    factories.session(alice.workspace)
    [before] = live_receiver.wait_for(1)
    old_kid = keys.active_key().kid
    assert f"kid={old_kid}" in before.headers["Svc-Signature"]
    new_kid = keys.rotate().kid
    factories.session(alice.workspace)
    after = live_receiver.wait_for(2)[1]
    assert after.verified and f"kid={new_kid}" in after.headers["Svc-Signature"]
    # The receiver refetched the key set on the unknown kid; the retiring key is still in it.
    doc = live_receiver.doc
    assert doc.verify(live_receiver.keyset, before.headers["Svc-Signature"], before.body)["id"] == before.event["id"]
    assert set(live_receiver.keyset.keys) >= {old_kid, new_kid}


def _worker_owning_connection(server_pid: int, port: int, receiver_port: int) -> int | None:
    """The server's process holding the connection from local `port` to the receiver, looked
    for again until it is found; None once that connection is no longer open (the attempt timed
    out before the scan found it). The connection is named by both ports: the kernel hands the
    same local port to connections to other destinations, so other processes may hold sockets
    of that port number. A connection held by a process outside the server fails at once,
    naming it: an attempt made by another server's task cluster on this database is a leak
    between tests, not a miss."""
    deadline = time.monotonic() + 10
    while True:
        rows = [row for row in tcp_sockets(port) if int(row[1].rsplit(":", 1)[1], 16) == receiver_port]
        inodes = {row[2] for row in rows} - {"0"}
        pid = pid_holding_socket(descendants(server_pid), inodes)
        if pid is not None:
            return pid
        if not any(row[3] == "01" for row in rows):  # 01: ESTABLISHED
            return None
        anywhere = pid_holding_socket([int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()], inodes)
        if anywhere is not None and anywhere not in descendants(server_pid):
            chain, up = [], anywhere
            while up and up > 1 and len(chain) < 6:
                chain.append(f"{up} {cmdline_of(up).replace(bytes(1), b' ')[:120]!r}")
                up = parent_of(up)
            raise AssertionError(f"the connection from local port {port} to the receiver is held by a process "
                                 f"outside the server {server_pid}: " + " <- ".join(chain))
        if time.monotonic() > deadline:
            raise AssertionError(f"no process of the server owns the connection from local port {port}: "
                                 f"/proc/net/tcp rows (local, remote, inode, state) {rows}; owner anywhere: {anywhere}")
        time.sleep(0.05)


def test_a_worker_killed_mid_attempt_loses_nothing(webhook_server, live_receiver, alice):
    """Every request hangs until a worker has been caught holding one and killed. On a busy
    machine the scan can miss an attempt's window (the worker's 4 s timeout ends it first, seen
    in CI, and three in a row in a full run beside two CPU burners): that attempt is recorded
    as a timeout and the next one is caught instead, up to the sixth of the seven attempts (the
    seventh must then succeed)."""
    killed = threading.Event()
    live_receiver.behaviour = lambda n: 204 if killed.is_set() else "hang"
    endpoint_id = subscribe(webhook_server, alice, live_receiver.url)
    factories.session(alice.workspace)
    for arrival in range(1, 7):
        worker_port = live_receiver.wait_for_arrivals(arrival)[arrival - 1]  # this attempt's, not a later one's
        worker = _worker_owning_connection(webhook_server.process.pid, worker_port, live_receiver.port)
        if worker is not None:
            break
    else:
        raise AssertionError("six attempts in a row ended before their worker was found")
    os.kill(worker, signal.SIGKILL)
    killed.set()
    live_receiver.release.set()
    wait_until(lambda: Delivery.objects.filter(endpoint_id=endpoint_id, status="succeeded").exists())
    delivery = Delivery.objects.get(endpoint_id=endpoint_id)
    timed_out = arrival - 1
    # The killed attempt never completed and left no row; the ones missed timed out; the retry
    # after the kill succeeded, once.
    assert delivery.attempt_count == timed_out + 1
    assert [(a.http_status, a.error) for a in delivery.attempts.all()] == (
        [(None, "timeout")] * timed_out + [(204, "")]
    )
    requests = live_receiver.wait_for(arrival + 1)
    assert len(requests) == arrival + 1 and {r.headers["Svc-Delivery-Id"] for r in requests} == {delivery.id}
    assert all(r.verified for r in requests)


def _sentinel_children(server_pid: int) -> list[int]:
    """The processes django-q2's sentinel runs (workers, monitor, pusher): the children of the
    one task-cluster process that has several."""
    parents = {}
    for pid in descendants(server_pid):
        ppid = parent_of(pid)
        if ppid is not None and b"qcluster" in cmdline_of(pid):
            parents.setdefault(ppid, []).append(pid)
    sentinel, children = max(parents.items(), key=lambda item: len(item[1]))
    assert len(children) >= 3, parents
    return children


def test_the_cluster_keeps_delivering_after_its_idle_workers_are_killed(webhook_server, live_receiver, alice):
    """django-q2#23: an idle worker waits holding the task queue's reader lock, and killed there
    it used to leave every other worker waiting for that lock forever (bench/webhooks.py's kill
    phase: 4,995 deliveries stuck). Every sentinel child is killed at once, so the holder is."""
    endpoint_id = subscribe(webhook_server, alice, live_receiver.url)
    factories.session(alice.workspace)
    live_receiver.wait_for(1)
    wait_until(settled(endpoint_id=endpoint_id))
    for pid in _sentinel_children(webhook_server.process.pid):
        os.kill(pid, signal.SIGKILL)

    session = factories.session(alice.workspace)

    [_, second] = live_receiver.wait_for(2, timeout=90)
    assert second.verified and second.event["data"]["sessionId"] == session.id
    wait_until(lambda: Delivery.objects.filter(endpoint_id=endpoint_id, status="succeeded").count() == 2)


def test_the_documented_receiver_verifies_and_deduplicates_live_deliveries(webhook_server, webhook_settings, alice):
    """docs/webhooks.md's receiver, run as written (its own HTTP server, JWKS fetched over HTTP)."""
    from tests.servers import free_port
    from tests.webhooks.receiver import doc_receiver

    doc = doc_receiver()
    events = []
    port = free_port()
    server = doc.serve(host="127.0.0.1", port=port, on_event=events.append,
                       jwks_url=f"{webhook_server.url}/.well-known/webhook-signing-keys.json")
    try:
        endpoint_id = subscribe(webhook_server, alice, f"http://127.0.0.1:{port}/connect")
        session = factories.session(alice.workspace)
        wait_until(lambda: Delivery.objects.filter(endpoint_id=endpoint_id, status="succeeded").exists())
        [event] = events
        assert event["type"] == "session.created" and event["data"]["sessionId"] == session.id
        delivery = Delivery.objects.get(endpoint_id=endpoint_id)
        assert delivery.last_http_status == 204
        key = factories.api_key(alice, factories.ALL_SCOPES)
        with webhook_server.client(headers={"Authorization": f"Bearer {key}"}) as client:
            replay = client.post(f"/api/v1/webhook-deliveries/{delivery.id}/replay").json()
        wait_until(lambda: Delivery.objects.filter(id=replay["id"], status="succeeded").exists())
        assert len(events) == 1  # the replay was acknowledged and deduplicated on the event id
    finally:
        server.shutdown()
        server.server_close()


def test_only_the_webhook_server_runs_a_sweeper_and_workers(webhook_server, live_server_daphne):
    """The live servers of a test worker share its database: a second sweeper, with the default
    schedule and leases, would claim these tests' due deliveries and retry them on its own queue
    minutes later (seen: a dead-letter test waiting 90 s after its second attempt)."""

    def task_processes(server) -> list[str]:
        commands = [cmdline_of(pid).replace(b"\0", b" ").decode() for pid in descendants(server.process.pid)]
        return [c for c in commands if "sweep_webhook_deliveries" in c or "qcluster" in c]

    assert task_processes(webhook_server)
    assert task_processes(live_server_daphne) == []
