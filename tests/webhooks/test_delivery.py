"""Delivery attempts in-process against a real threaded receiver that verifies every
signature over HTTP: outcomes, the schedule to dead letter, drains and their batches, leases,
races and cancellation."""

from __future__ import annotations

import io
import threading
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.access.credentials import authenticate_bearer
from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey
from apps.webhooks import delivery as engine
from apps.webhooks import results, services
from apps.webhooks.models import Delivery
from tests import factories
from tests.servers import free_port

STATUS_FILTERS = [{"type": "session.created"}]


@pytest.fixture
def queued(monkeypatch):
    """Drains are run by the test itself: count what would go on django-q2 instead."""
    drains: list[tuple] = []
    monkeypatch.setattr("apps.webhooks.drain_queue.async_task", lambda *args, **kwargs: drains.append(args))
    return drains


def make_endpoint(membership, url: str, scopes=None, filters=STATUS_FILTERS):
    key = factories.api_key(membership, scopes or factories.ALL_SCOPES)
    principal = authenticate_bearer(f"Bearer {key}")
    return services.create_endpoint(principal=principal, name="hook", url=url, filters=filters)


def new_delivery(endpoint, queued, event_type="session.created") -> Delivery:
    now = timezone.now()
    [d] = services.create_event_deliveries(
        workspace_id=endpoint.workspace_id, event_id="evt_01test", event_type=event_type,
        session_id="s1", occurred_at=now, data={"sessionId": "s1", "occurredAt": "x", "session": {"id": "s1"}},
    )
    return d


def attempt_due() -> list[tuple[str, str]]:
    """One turn of a drain: one claim and its batch (a drain would go on with retries due at
    once under the compressed schedule)."""
    token, ids = engine.claim_batch()
    return engine.attempt_batch(token, ids, deadline=engine.drain_deadline()) if ids else []


def test_a_delivery_is_signed_verified_and_recorded(webhook_settings, receiver, alice, queued):
    endpoint = make_endpoint(alice, receiver.url)
    delivery = new_delivery(endpoint, queued)
    assert engine.drain() == [(delivery.id, "succeeded")]
    [request] = receiver.wait_for(1)
    assert request.verified
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Svc-Webhook-Id"] == endpoint.id
    assert request.headers["Svc-Event-Id"] == "evt_01test" == request.event["id"]
    assert request.headers["Svc-Delivery-Id"] == delivery.id
    assert request.event["type"] == "session.created" and request.event["data"]["sessionId"] == "s1"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.last_http_status) == ("succeeded", 1, 204)
    assert (delivery.lease_token, delivery.lease_until) == ("", None)
    [attempt] = delivery.attempts.all()
    assert (attempt.number, attempt.http_status, attempt.error) == (1, 204, "")
    # Another drain (a broker re-delivery, the sweeper's) finds nothing due.
    assert engine.drain() == []
    assert len(receiver.requests) == 1


def test_failures_retry_on_the_schedule_until_dead_letter_after_exactly_seven(
    webhook_settings, receiver, alice, queued
):
    receiver.behaviour = lambda n: 500
    endpoint = make_endpoint(alice, receiver.url)
    delivery = new_delivery(endpoint, queued)
    outcomes = []
    while done := attempt_due():
        outcomes += [status for _, status in done]
    assert outcomes == ["retrying"] * 6 + ["dead_letter"]
    assert len(receiver.wait_for(7)) == 7 and all(r.verified for r in receiver.requests)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.stop_reason, delivery.attempt_count) == ("dead_letter", "max_attempts", 7)
    assert delivery.is_dead_letter  # the back office lists it first
    assert [a.error for a in delivery.attempts.all()] == ["http_error"] * 7
    endpoint.refresh_from_db()
    assert endpoint.active  # not disabled automatically
    assert not engine.any_due()


def test_the_default_schedule_spaces_retries(settings, receiver, alice, queued):
    settings.CONNECT_WEBHOOKS_ALLOW_PRIVATE = True
    receiver.behaviour = lambda n: 503
    delivery = new_delivery(make_endpoint(alice, receiver.url), queued)
    assert engine.drain() == [(delivery.id, "retrying")]  # one attempt: the retry is not due yet
    delivery.refresh_from_db()
    assert delivery.status == "retrying"
    assert timedelta(seconds=59) < delivery.next_attempt_at - delivery.updated_at <= timedelta(seconds=60)
    assert not engine.any_due()


@pytest.mark.parametrize(
    "behaviour,error",
    [("hang", "timeout"), (("redirect", "http://127.0.0.1:9/elsewhere"), "redirect"), (404, "http_error")],
)
def test_attempt_errors(webhook_settings, receiver, alice, queued, behaviour, error):
    receiver.behaviour = lambda n: behaviour
    delivery = new_delivery(make_endpoint(alice, receiver.url), queued)
    assert attempt_due() == [(delivery.id, "retrying")]
    attempt = Delivery.objects.get(id=delivery.id).attempts.get()
    assert attempt.error == error
    assert len(receiver.requests) == 1  # a redirect is not followed
    if error == "timeout":
        assert attempt.duration_ms < 3000  # bounded by the (test) 1.5 s total timeout


def test_connection_refused_is_a_network_error(webhook_settings, alice, queued):
    delivery = new_delivery(make_endpoint(alice, f"http://127.0.0.1:{free_port()}/hook"), queued)
    assert attempt_due() == [(delivery.id, "retrying")]
    assert Delivery.objects.get(id=delivery.id).attempts.get().error == "network_error"


def test_a_name_that_resolves_to_a_private_address_at_connect_time_is_blocked(settings, alice, queued, monkeypatch):
    """DNS rebinding: public when the endpoint was saved, loopback when the delivery connects."""
    answers = {"rebind.example.com": ["93.184.216.34"]}
    lookups = []

    def resolve(host, port):
        lookups.append(host)
        return answers[host]

    monkeypatch.setattr("apps.webhooks.outbound.resolve", resolve)
    settings.CONNECT_WEBHOOKS_ALLOW_PRIVATE = False
    engine._sender = None
    endpoint = make_endpoint(alice, "https://rebind.example.com/hook")
    answers["rebind.example.com"] = ["93.184.216.34", "127.0.0.1"]
    delivery = new_delivery(endpoint, queued)
    try:
        assert attempt_due() == [(delivery.id, "retrying")]
    finally:
        engine._sender = None
    assert Delivery.objects.get(id=delivery.id).attempts.get().error == "blocked_destination"
    assert lookups == ["rebind.example.com", "rebind.example.com"]  # once at save, once at connect


def test_the_connect_time_check_dials_the_checked_address_with_the_original_host_name(webhook_settings, receiver,
                                                                                      alice, queued, monkeypatch):
    port = receiver.server.server_address[1]
    monkeypatch.setattr("apps.webhooks.outbound.resolve", lambda host, p: ["127.0.0.1"])
    delivery = new_delivery(make_endpoint(alice, f"http://hooks.test:{port}/hook"), queued)
    assert engine.drain() == [(delivery.id, "succeeded")]
    assert receiver.requests[0].headers["Host"] == f"hooks.test:{port}"


def _in_threads(count: int, work) -> list:
    """Run `work` in `count` threads released at once, each on its own database connection."""
    results, barrier = [], threading.Barrier(count)

    def run():
        from django.db import connection

        barrier.wait()
        try:
            results.append(work())
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == count
    return results


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_on_one_due_delivery_attempt_it_once(webhook_settings, jwks_server, alice, queued):
    from tests.webhooks.receiver import Receiver

    receiver = Receiver(jwks_server.url, behaviour=lambda n: 204)
    try:
        delivery = new_delivery(make_endpoint(alice, receiver.url), queued)
        results = _in_threads(4, engine.drain)
        assert sorted(results) == [[], [], [], [(delivery.id, "succeeded")]]
        assert len(receiver.requests) == 1
        assert Delivery.objects.get(id=delivery.id).attempt_count == 1
    finally:
        receiver.close()


@pytest.mark.django_db(transaction=True)
def test_racing_claims_take_each_due_delivery_once(webhook_settings, alice, queued):
    webhook_settings.CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY = 100  # no cap: every claim takes a batch
    endpoints = [make_endpoint(alice, "http://127.0.0.1:9/hook", filters=[{"type": kind}])
                 for kind in ("session.created", "session.status_changed")]
    for i in range(40):
        new_delivery(endpoints[i % 2], queued, event_type=("session.created", "session.status_changed")[i % 2])
    claims = _in_threads(3, lambda: [engine.claim_batch(limit=7) for _ in range(5)])
    batches = [ids for claim in claims for _, ids in claim if ids]
    ids = [i for batch in batches for i in batch]
    assert len(ids) == len(set(ids)) == 40
    by_id = dict(Delivery.objects.values_list("id", "endpoint_id"))
    assert all(len({by_id[i] for i in batch}) == 1 for batch in batches)  # one endpoint per batch
    assert not engine.any_due()


def test_a_claim_takes_one_endpoints_due_deliveries_oldest_first(webhook_settings, alice, queued):
    # Both endpoints start level (fair_clock 0): the tie goes to the longest-waiting delivery's
    # endpoint; the second claim skips that endpoint, whose batch is in flight.
    hook = make_endpoint(alice, "http://127.0.0.1:9/hook")
    other = make_endpoint(alice, "http://127.0.0.1:9/other", filters=[{"type": "session.status_changed"}])
    theirs = new_delivery(other, queued, event_type="session.status_changed")
    mine = [new_delivery(hook, queued) for _ in range(3)]
    Delivery.objects.filter(id=theirs.id).update(next_attempt_at=timezone.now() - timedelta(seconds=5))
    Delivery.objects.filter(id=mine[2].id).update(next_attempt_at=timezone.now() - timedelta(seconds=10))
    _, first = engine.claim_batch()
    assert first == [mine[2].id, mine[0].id, mine[1].id]
    _, second = engine.claim_batch()
    assert second == [theirs.id]
    assert engine.claim_batch() == ("", [])
    leased = Delivery.objects.filter(id__in=first).values_list("lease_token", flat=True)
    assert len(set(leased)) == 1 and "" not in leased


def test_an_expired_attempt_lease_is_due_again_and_the_old_worker_cannot_write(webhook_settings, receiver,
                                                                               alice, queued):
    delivery = new_delivery(make_endpoint(alice, receiver.url), queued)
    old_token, _ = engine.claim_batch()  # a worker took it, then died
    assert old_token and not engine.any_due()  # its lease is live
    Delivery.objects.filter(id=delivery.id).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert engine.any_due()
    assert engine.drain() == [(delivery.id, "succeeded")]
    stale = results.record(old_token, [(Delivery.objects.get(id=delivery.id), timezone.now(),
                                        engine.outbound.Outcome(500, "http_error", 1))])
    assert stale == {}  # nothing written
    assert Delivery.objects.get(id=delivery.id).status == "succeeded"


@pytest.mark.parametrize("change,reason", [("delete", "endpoint_deleted"), ("deactivate", "endpoint_disabled")])
def test_an_endpoint_deleted_or_deactivated_with_deliveries_pending(
    webhook_settings, receiver, alice, queued, monkeypatch, change, reason
):
    def stop(endpoint):
        if change == "delete":
            services.delete_endpoint(endpoint=endpoint)
        else:
            services.update_endpoint(endpoint=endpoint, changes={"active": False})

    # Not yet attempted: cancelled, no longer due, nothing sent.
    endpoint = make_endpoint(alice, receiver.url)
    delivery = new_delivery(endpoint, queued)
    stop(endpoint)
    assert engine.drain() == []
    delivery.refresh_from_db()
    assert (delivery.status, delivery.stop_reason) == ("cancelled", reason)
    assert receiver.requests == []

    # In flight: the request completes, but its result does not revive the cancelled delivery.
    other = make_endpoint(alice, receiver.url)
    in_flight = new_delivery(other, queued)
    real_post = engine.sender().post

    def post_then_stop(*args, **kwargs):
        outcome = real_post(*args, **kwargs)
        stop(other)
        return outcome

    monkeypatch.setattr(engine.sender(), "post", post_then_stop)
    assert engine.drain() == [(in_flight.id, "lease_lost")]
    in_flight.refresh_from_db()
    assert (in_flight.status, in_flight.stop_reason, in_flight.attempt_count) == ("cancelled", reason, 0)
    assert len(receiver.requests) == 1 and receiver.requests[0].verified


def test_member_deactivated_cancels_with_installation_unauthorized(webhook_settings, receiver, alice, queued):
    delivery = new_delivery(make_endpoint(alice, receiver.url), queued)
    tenancy.deactivate_member(membership=alice)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.stop_reason) == ("cancelled", "installation_unauthorized")
    assert engine.drain() == []
    assert receiver.requests == []


def test_a_revoked_key_or_lost_scope_is_caught_at_attempt_time(webhook_settings, receiver, alice, queued):
    endpoint = make_endpoint(alice, receiver.url)
    delivery = new_delivery(endpoint, queued)
    # Written around the services (no signal): the attempt itself must notice.
    ApiKey.objects.filter(id=endpoint.credential_id).update(scopes=["svc:webhooks:write"])
    assert engine.drain() == [(delivery.id, "cancelled")]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.stop_reason) == ("cancelled", "installation_unauthorized")
    assert receiver.requests == []

    services.delete_endpoint(endpoint=endpoint)
    other = make_endpoint(alice, receiver.url)
    pending = Delivery.objects.filter(endpoint=other)
    new_delivery(other, queued)
    tenancy.revoke_api_key(api_key=ApiKey.objects.get(id=other.credential_id))
    assert pending.get().stop_reason == "installation_unauthorized"


def test_test_delivery_is_terminal_after_one_attempt(webhook_settings, receiver, alice, queued):
    receiver.behaviour = lambda n: 500
    endpoint = make_endpoint(alice, receiver.url)
    test = services.send_test_delivery(endpoint=endpoint)
    assert engine.drain() == [(test.id, "dead_letter")]
    test.refresh_from_db()
    assert (test.kind, test.attempt_count, test.status) == ("test", 1, "dead_letter")
    assert receiver.requests[0].verified and receiver.requests[0].event["type"] == "webhook.test"


def test_an_oauth_installation_holds_while_its_grant_lives(webhook_settings, receiver, alice, queued):
    """OAuth: the member's grant to the application in this workspace; revoking its tokens
    (refresh token revoked, access tokens expired) cancels with installation_unauthorized."""
    from apps.oauth.services import create_client
    from apps.oauth.models import AccessToken
    from tests.oauth.test_grants_and_credentials import REDIRECT, issue

    application = create_client(name="Agent", redirect_uri=REDIRECT).application
    raw = issue(alice, application, scope="svc:sessions:read svc:webhooks:write")
    principal = authenticate_bearer(f"Bearer {raw}")
    endpoint = services.create_endpoint(principal=principal, name="oauth", url=receiver.url, filters=STATUS_FILTERS)
    assert (endpoint.credential_kind, endpoint.oauth_application_id) == ("oauth", application.id)
    delivery = new_delivery(endpoint, queued)
    assert engine.drain() == [(delivery.id, "succeeded")]
    AccessToken.objects.filter(application=application).update(expires=timezone.now() - timedelta(seconds=1))
    engine._installation_checks.clear()
    services.delete_endpoint(endpoint=endpoint)  # free the filters for a second endpoint of the same grant
    other = services.create_endpoint(principal=principal, name="oauth2", url=receiver.url, filters=STATUS_FILTERS)
    second = new_delivery(other, queued)
    assert engine.drain() == [(second.id, "cancelled")]
    assert Delivery.objects.get(id=second.id).stop_reason == "installation_unauthorized"


def test_a_drain_sends_an_endpoints_batch_over_one_connection_and_each_endpoint_in_its_own(
    webhook_settings, receiver, alice, queued
):
    webhook_settings.CONNECT_WEBHOOK_LEASE_SECONDS = 30  # room for every batch
    endpoint = make_endpoint(alice, receiver.url)
    other = make_endpoint(alice, receiver.url, filters=[{"type": "session.status_changed"}])
    mine = [new_delivery(endpoint, queued) for _ in range(3)]
    theirs = new_delivery(other, queued, event_type="session.status_changed")
    assert engine.drain() == [(d.id, "succeeded") for d in mine] + [(theirs.id, "succeeded")]
    requests = receiver.wait_for(4)
    assert [r.headers["Svc-Delivery-Id"] for r in requests] == [d.id for d in [*mine, theirs]]
    assert all(r.verified for r in requests)
    assert len({r.peer_port for r in requests[:3]}) == 1  # one keep-alive connection
    for d in [*mine, theirs]:
        d.refresh_from_db()
        assert (d.status, d.attempt_count, d.attempts.get().number) == ("succeeded", 1, 1)


def test_a_drain_asks_for_help_after_a_full_claim_only(webhook_settings, receiver, alice, queued, monkeypatch):
    webhook_settings.CONNECT_WEBHOOK_LEASE_SECONDS = 30
    monkeypatch.setattr(engine, "BATCH", 2)
    endpoint = make_endpoint(alice, receiver.url)
    for _ in range(3):
        new_delivery(endpoint, queued)
    calls = []
    assert len(engine.drain(on_backlog=lambda: calls.append("help"))) == 3
    assert calls == ["help"]  # after the first claim (2 of 2), not after the second (1) or the empty third


def test_a_claim_leaves_deliveries_in_flight_or_not_yet_due_alone(webhook_settings, receiver, alice, queued):
    # Room for a second batch beside the other worker's (with the default cap of 1 the endpoint
    # would wait for it: tests/webhooks/test_fairness.py).
    webhook_settings.CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY = 2
    endpoint = make_endpoint(alice, receiver.url)
    first, in_flight, later = [new_delivery(endpoint, queued) for _ in range(3)]
    Delivery.objects.filter(id=in_flight.id).update(  # another worker's attempt
        lease_token="theirs", lease_until=timezone.now() + timedelta(seconds=30))
    Delivery.objects.filter(id=later.id).update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    assert engine.drain() == [(first.id, "succeeded")]
    assert [r.headers["Svc-Delivery-Id"] for r in receiver.wait_for(1)] == [first.id]
    assert Delivery.objects.get(id=in_flight.id).lease_token == "theirs"
    assert Delivery.objects.get(id=later.id).attempt_count == 0


def test_a_batch_stops_at_a_network_error_and_leaves_the_rest_due(webhook_settings, alice, queued):
    webhook_settings.CONNECT_WEBHOOK_LEASE_SECONDS = 30  # room for the whole batch
    endpoint = make_endpoint(alice, f"http://127.0.0.1:{free_port()}/hook")
    first, *rest = [new_delivery(endpoint, queued) for _ in range(3)]
    assert attempt_due() == [(first.id, "retrying")]
    for d in rest:
        d.refresh_from_db()
        assert (d.status, d.attempt_count, d.lease_token, d.lease_until) == ("pending", 0, "", None)
    # Due and unleased: the next claim takes them (and the retry of the first) again.
    assert sorted(engine.claim_batch()[1]) == sorted([first.id] + [d.id for d in rest])


def test_a_drain_starts_no_attempt_that_could_outlive_its_lease(webhook_settings, receiver, alice, queued):
    # Lease 3 s, timeout 1.5 s, margin 1 s: after a 0.6 s request a second one could end
    # past the lease, so it is not started; the rest are released, and the drain asks for another.
    receiver.behaviour = lambda n: time.sleep(0.6) or 204
    endpoint = make_endpoint(alice, receiver.url)
    first, *rest = [new_delivery(endpoint, queued) for _ in range(3)]
    calls = []
    assert engine.drain(on_backlog=lambda: calls.append("more")) == [(first.id, "succeeded")]
    assert calls == ["more"]
    assert len(receiver.wait_for(1)) == 1
    time.sleep(0.3)
    assert len(receiver.requests) == 1
    assert all(Delivery.objects.get(id=d.id).lease_token == "" for d in rest)
    assert engine.any_due()


def test_a_drain_ends_inside_the_task_timeout(webhook_settings, receiver, alice, queued, settings):
    """django-q2 kills a task at its timeout: a drain must stop starting requests before it,
    even when the attempt lease is longer, or a killed batch would be sent again."""
    webhook_settings.CONNECT_WEBHOOK_LEASE_SECONDS = 60
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 3}
    before = time.monotonic()
    assert engine.drain_deadline() - before == pytest.approx(3 - engine.LEASE_MARGIN_SECONDS, abs=0.1)


def test_one_drain_is_queued_while_one_waits(webhook_settings, alice, queued, django_capture_on_commit_callbacks,
                                             monkeypatch):
    from apps.webhooks import drain_queue, tasks
    from apps.webhooks.models import QueuedDrain

    monkeypatch.setattr(tasks, "close_old_connections", lambda: None)  # it would close the test's transaction
    endpoint = make_endpoint(alice, "http://127.0.0.1:9/hook")
    with django_capture_on_commit_callbacks(execute=True):
        new_delivery(endpoint, queued)
    with django_capture_on_commit_callbacks(execute=True):
        new_delivery(endpoint, queued)
    assert queued == [(drain_queue.DRAIN_TASK,)]  # the second found the first waiting
    assert drain_queue.request_drain() is False and tasks.sweep() == 0

    # A drain, as it starts, says none is waiting: the next delivery queues another.
    Delivery.objects.update(status="cancelled")
    assert tasks.drain() == 0
    assert drain_queue.request_drain() is True and len(queued) == 2

    # A drain that never started (its broker lost it) is replaced once the queue lease passes.
    QueuedDrain.objects.update(until=timezone.now() - timedelta(seconds=1))
    assert drain_queue.request_drain() is True and len(queued) == 3

    # A database whose flag row is gone (flushed) gets it back.
    QueuedDrain.objects.all().delete()
    assert drain_queue.request_drain() is True and len(queued) == 4
    assert QueuedDrain.objects.get().until > timezone.now()


def test_a_broker_failure_leaves_no_drain_marked_waiting(webhook_settings, alice, monkeypatch):
    from apps.webhooks import drain_queue
    from apps.webhooks.models import QueuedDrain

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr("apps.webhooks.drain_queue.async_task", broker_down)
    assert drain_queue.request_drain() is False
    # The next event or sweep tries again (the row may be absent after an earlier test's flush).
    assert not QueuedDrain.objects.filter(until__isnull=False).exists()


def test_the_sweeper_queues_a_drain_only_while_a_delivery_is_due(webhook_settings, alice, queued):
    from apps.webhooks import tasks
    from apps.webhooks.models import QueuedDrain

    assert tasks.sweep() == 0 and queued == []
    delivery = new_delivery(make_endpoint(alice, "http://127.0.0.1:9/hook"), queued)
    Delivery.objects.filter(id=delivery.id).update(next_attempt_at=timezone.now() + timedelta(minutes=1))
    assert tasks.sweep() == 0  # a retry not yet due
    Delivery.objects.filter(id=delivery.id).update(
        next_attempt_at=timezone.now(), lease_token="dead", lease_until=timezone.now() + timedelta(seconds=30))
    assert tasks.sweep() == 0  # in flight
    Delivery.objects.filter(id=delivery.id).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert tasks.sweep() == 1 and len(queued) == 1  # its worker died: due again
    QueuedDrain.objects.update(until=None)
    call_command("sweep_webhook_deliveries", stdout=(out := io.StringIO()))
    assert out.getvalue().strip() == "queued 1"


@pytest.mark.parametrize("answer", ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"])
def test_with_the_development_flag_a_name_rebound_to_a_metadata_address_is_blocked_at_connect_time(
    webhook_settings, receiver, alice, queued, monkeypatch, answer
):
    """CONNECT_WEBHOOKS_ALLOW_PRIVATE lets the delivery reach loopback, never the deny list: the
    address dialled is checked against it whatever the flag says."""
    answers = {"hooks.test": ["127.0.0.1"]}
    monkeypatch.setattr("apps.webhooks.outbound.resolve", lambda host, port: answers[host])
    port = receiver.server.server_address[1]
    endpoint = make_endpoint(alice, f"http://hooks.test:{port}/hook")
    first = new_delivery(endpoint, queued)
    assert engine.drain() == [(first.id, "succeeded")]  # loopback: allowed by the flag
    engine.sender().close()  # no kept-alive connection: the next attempt dials again
    answers["hooks.test"] = [answer]
    second = new_delivery(endpoint, queued)
    assert attempt_due() == [(second.id, "retrying")]
    assert Delivery.objects.get(id=second.id).attempts.get().error == "blocked_destination"
    assert len(receiver.requests) == 1
