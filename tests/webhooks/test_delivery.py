"""Delivery attempts in-process against a real threaded receiver that verifies every
signature over HTTP: outcomes, the schedule to dead letter, leases, races and cancellation."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.tenancy import services as tenancy
from apps.tenancy.authentication import authenticate_bearer
from apps.tenancy.models import ApiKey
from apps.webhooks import delivery as engine
from apps.webhooks import services
from apps.webhooks.models import Delivery
from tests import factories
from tests.servers import free_port

STATUS_FILTERS = [{"type": "session.created"}]


@pytest.fixture
def queued(monkeypatch):
    """Capture what would go on django-q2: (delivery id, token) pairs."""
    pairs: list[tuple[str, str]] = []
    monkeypatch.setattr("apps.webhooks.tasks.queue_attempts", lambda p: pairs.extend(p))
    return pairs


def make_endpoint(membership, url: str, scopes=None, filters=STATUS_FILTERS):
    key = factories.api_key(membership, scopes or factories.ALL_SCOPES)
    principal = authenticate_bearer(f"Bearer {key}")
    return services.create_endpoint(principal=principal, name="hook", url=url, filters=filters)


def new_delivery(endpoint, queued, event_type="session.created") -> tuple[Delivery, str]:
    now = timezone.now()
    [d] = services.create_event_deliveries(
        workspace_id=endpoint.workspace_id, event_id="evt_01test", event_type=event_type,
        session_id="s1", occurred_at=now, data={"sessionId": "s1", "occurredAt": "x", "session": {"id": "s1"}},
    )
    return d, d.lease_token


def test_a_delivery_is_signed_verified_and_recorded(webhook_settings, receiver, alice, queued):
    endpoint = make_endpoint(alice, receiver.url)
    delivery, token = new_delivery(endpoint, queued)
    assert engine.deliver_once(delivery.id, token) == "succeeded"
    [request] = receiver.wait_for(1)
    assert request.verified
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Svc-Webhook-Id"] == endpoint.id
    assert request.headers["Svc-Event-Id"] == "evt_01test" == request.event["id"]
    assert request.headers["Svc-Delivery-Id"] == delivery.id
    assert request.event["type"] == "session.created" and request.event["data"]["sessionId"] == "s1"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.last_http_status) == ("succeeded", 1, 204)
    [attempt] = delivery.attempts.all()
    assert (attempt.number, attempt.http_status, attempt.error) == (1, 204, "")
    # The task ran once; running it again (a broker re-delivery) does nothing.
    assert engine.deliver_once(delivery.id, token) == "skipped"
    assert len(receiver.requests) == 1


def test_failures_retry_on_the_schedule_until_dead_letter_after_exactly_seven(
    webhook_settings, receiver, alice, queued
):
    receiver.behaviour = lambda n: 500
    endpoint = make_endpoint(alice, receiver.url)
    delivery, token = new_delivery(endpoint, queued)
    outcomes = [engine.deliver_once(delivery.id, token)]
    while outcomes[-1] == "retrying":
        [(delivery_id, token)] = engine.claim_due()
        outcomes.append(engine.deliver_once(delivery_id, token))
    assert outcomes == ["retrying"] * 6 + ["dead_letter"]
    assert len(receiver.wait_for(7)) == 7 and all(r.verified for r in receiver.requests)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.stop_reason, delivery.attempt_count) == ("dead_letter", "max_attempts", 7)
    assert delivery.is_dead_letter  # the back office lists it first
    assert [a.error for a in delivery.attempts.all()] == ["http_error"] * 7
    endpoint.refresh_from_db()
    assert endpoint.active  # not disabled automatically
    assert engine.claim_due() == []


def test_the_default_schedule_spaces_retries(settings, receiver, alice, queued):
    settings.CONNECT_WEBHOOKS_ALLOW_PRIVATE = True
    receiver.behaviour = lambda n: 503
    delivery, token = new_delivery(make_endpoint(alice, receiver.url), queued)
    engine.deliver_once(delivery.id, token)
    delivery.refresh_from_db()
    assert delivery.status == "retrying"
    assert timedelta(seconds=59) < delivery.next_attempt_at - delivery.updated_at <= timedelta(seconds=60)
    assert engine.claim_due() == []  # not due yet


@pytest.mark.parametrize(
    "behaviour,error",
    [("hang", "timeout"), (("redirect", "http://127.0.0.1:9/elsewhere"), "redirect"), (404, "http_error")],
)
def test_attempt_errors(webhook_settings, receiver, alice, queued, behaviour, error):
    receiver.behaviour = lambda n: behaviour
    delivery, token = new_delivery(make_endpoint(alice, receiver.url), queued)
    assert engine.deliver_once(delivery.id, token) == "retrying"
    attempt = Delivery.objects.get(id=delivery.id).attempts.get()
    assert attempt.error == error
    assert len(receiver.requests) == 1  # a redirect is not followed
    if error == "timeout":
        assert attempt.duration_ms < 3000  # bounded by the (test) 1.5 s total timeout


def test_connection_refused_is_a_network_error(webhook_settings, alice, queued):
    delivery, token = new_delivery(make_endpoint(alice, f"http://127.0.0.1:{free_port()}/hook"), queued)
    assert engine.deliver_once(delivery.id, token) == "retrying"
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
    delivery, token = new_delivery(endpoint, queued)
    try:
        assert engine.deliver_once(delivery.id, token) == "retrying"
    finally:
        engine._sender = None
    assert Delivery.objects.get(id=delivery.id).attempts.get().error == "blocked_destination"
    assert lookups == ["rebind.example.com", "rebind.example.com"]  # once at save, once at connect


def test_the_connect_time_check_dials_the_checked_address_with_the_original_host_name(webhook_settings, receiver,
                                                                                      alice, queued, monkeypatch):
    port = receiver.server.server_address[1]
    monkeypatch.setattr("apps.webhooks.outbound.resolve", lambda host, p: ["127.0.0.1"])
    delivery, token = new_delivery(make_endpoint(alice, f"http://hooks.test:{port}/hook"), queued)
    assert engine.deliver_once(delivery.id, token) == "succeeded"
    assert receiver.requests[0].headers["Host"] == f"hooks.test:{port}"


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_on_one_due_delivery_attempt_it_once(webhook_settings, jwks_server, alice, queued):
    from tests.webhooks.receiver import Receiver

    receiver = Receiver(jwks_server.url, behaviour=lambda n: 204)
    try:
        delivery, token = new_delivery(make_endpoint(alice, receiver.url), queued)
        results, barrier = [], threading.Barrier(4)

        def worker():
            from django.db import connection

            barrier.wait()
            try:
                results.append(engine.deliver_once(delivery.id, token))
            finally:
                connection.close()

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(results) == ["skipped"] * 3 + ["succeeded"]
        assert len(receiver.requests) == 1
        assert Delivery.objects.get(id=delivery.id).attempt_count == 1
    finally:
        receiver.close()


@pytest.mark.django_db(transaction=True)
def test_racing_sweepers_claim_each_due_delivery_once(webhook_settings, alice, queued):
    endpoint = make_endpoint(alice, "http://127.0.0.1:9/hook")
    for _ in range(30):
        new_delivery(endpoint, queued)
    Delivery.objects.update(lease_until=timezone.now() - timedelta(seconds=1))  # queueing was lost
    claims, barrier = [], threading.Barrier(3)

    def sweeper():
        from django.db import connection

        barrier.wait()
        try:
            claims.extend(engine.claim_due(limit=7) + engine.claim_due(limit=7) + engine.claim_due(limit=50))
        finally:
            connection.close()

    threads = [threading.Thread(target=sweeper) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ids = [delivery_id for delivery_id, _ in claims]
    assert len(ids) == len(set(ids)) == 30


def test_an_expired_attempt_lease_is_swept_and_the_old_worker_cannot_write(webhook_settings, receiver, alice, queued):
    delivery, token = new_delivery(make_endpoint(alice, receiver.url), queued)
    attempt_token, _ = engine._take_attempt_lease(delivery.id, token)  # a worker took it, then died
    assert attempt_token and engine.claim_due() == []  # its lease is live
    Delivery.objects.filter(id=delivery.id).update(lease_until=timezone.now() - timedelta(seconds=1))
    [(delivery_id, new_token)] = engine.claim_due()
    assert engine.deliver_once(delivery_id, new_token) == "succeeded"
    stale = engine._record(attempt_token, [(Delivery.objects.get(id=delivery.id), timezone.now(),
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

    # Queued, not yet attempted: the task finds its lease gone and sends nothing.
    endpoint = make_endpoint(alice, receiver.url)
    delivery, token = new_delivery(endpoint, queued)
    stop(endpoint)
    assert engine.deliver_once(delivery.id, token) == "skipped"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.stop_reason) == ("cancelled", reason)
    assert receiver.requests == []

    # In flight: the request completes, but its result does not revive the cancelled delivery.
    other = make_endpoint(alice, receiver.url)
    in_flight, token = new_delivery(other, queued)
    real_post = engine.sender().post

    def post_then_stop(*args, **kwargs):
        outcome = real_post(*args, **kwargs)
        stop(other)
        return outcome

    monkeypatch.setattr(engine.sender(), "post", post_then_stop)
    assert engine.deliver_once(in_flight.id, token) == "lease_lost"
    in_flight.refresh_from_db()
    assert (in_flight.status, in_flight.stop_reason, in_flight.attempt_count) == ("cancelled", reason, 0)
    assert len(receiver.requests) == 1 and receiver.requests[0].verified


def test_member_deactivated_cancels_with_installation_unauthorized(webhook_settings, receiver, alice, queued):
    delivery, token = new_delivery(make_endpoint(alice, receiver.url), queued)
    tenancy.deactivate_member(membership=alice)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.stop_reason) == ("cancelled", "installation_unauthorized")
    assert engine.deliver_once(delivery.id, token) == "skipped"
    assert receiver.requests == []


def test_a_revoked_key_or_lost_scope_is_caught_at_attempt_time(webhook_settings, receiver, alice, queued):
    endpoint = make_endpoint(alice, receiver.url)
    delivery, token = new_delivery(endpoint, queued)
    # Written around the services (no signal): the attempt itself must notice.
    ApiKey.objects.filter(id=endpoint.credential_id).update(scopes=["svc:webhooks:write"])
    assert engine.deliver_once(delivery.id, token) == "cancelled"
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
    assert engine.deliver_once(test.id, test.lease_token) == "dead_letter"
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
    delivery, token = new_delivery(endpoint, queued)
    assert engine.deliver_once(delivery.id, token) == "succeeded"
    AccessToken.objects.filter(application=application).update(expires=timezone.now() - timedelta(seconds=1))
    engine._installation_checks.clear()
    services.delete_endpoint(endpoint=endpoint)  # free the filters for a second endpoint of the same grant
    other = services.create_endpoint(principal=principal, name="oauth2", url=receiver.url, filters=STATUS_FILTERS)
    second, token = new_delivery(other, queued)
    assert engine.deliver_once(second.id, token) == "cancelled"
    assert Delivery.objects.get(id=second.id).stop_reason == "installation_unauthorized"


def test_a_task_attempts_the_deliveries_queued_behind_it_for_its_endpoint_once(
    webhook_settings, receiver, alice, queued
):
    webhook_settings.CONNECT_WEBHOOK_LEASE_SECONDS = 30  # room for the whole batch
    endpoint = make_endpoint(alice, receiver.url)
    other = make_endpoint(alice, receiver.url, filters=[{"type": "session.status_changed"}])
    mine = [new_delivery(endpoint, queued) for _ in range(3)]
    theirs, their_token = new_delivery(other, queued, event_type="session.status_changed")
    (first, token), *rest = mine
    assert engine.deliver_once(first.id, token, batch=engine.BATCH) == "succeeded"
    assert sorted(r.headers["Svc-Delivery-Id"] for r in receiver.wait_for(3)) == sorted(d.id for d, _ in mine)
    assert all(r.verified for r in receiver.requests)
    # The batch's other deliveries were taken from their own tasks, which now do nothing.
    assert [engine.deliver_once(d.id, t, batch=engine.BATCH) for d, t in rest] == ["skipped", "skipped"]
    for d, _ in mine:
        d.refresh_from_db()
        assert (d.status, d.attempt_count, d.attempts.get().number) == ("succeeded", 1, 1)
    # Another endpoint's delivery is left to its own task.
    assert Delivery.objects.get(id=theirs.id).status == "pending" and len(receiver.requests) == 3
    assert engine.deliver_once(theirs.id, their_token, batch=engine.BATCH) == "succeeded"


def test_a_batch_leaves_deliveries_in_flight_or_not_yet_due_alone(webhook_settings, receiver, alice, queued):
    webhook_settings.CONNECT_WEBHOOK_LEASE_SECONDS = 30  # room for the whole batch
    endpoint = make_endpoint(alice, receiver.url)
    (first, token), (in_flight, in_flight_token), (later, _) = [new_delivery(endpoint, queued) for _ in range(3)]
    attempt_token, ids = engine._take_attempt_lease(in_flight.id, in_flight_token)  # another worker's attempt
    assert ids == [in_flight.id]
    Delivery.objects.filter(id=later.id).update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    assert engine.deliver_once(first.id, token, batch=engine.BATCH) == "succeeded"
    assert [r.headers["Svc-Delivery-Id"] for r in receiver.wait_for(1)] == [first.id]
    assert Delivery.objects.get(id=in_flight.id).lease_token == attempt_token
    assert Delivery.objects.get(id=later.id).attempt_count == 0


def test_a_batch_stops_at_a_network_error_and_leaves_the_rest_due(webhook_settings, alice, queued):
    webhook_settings.CONNECT_WEBHOOK_LEASE_SECONDS = 30  # room for the whole batch
    endpoint = make_endpoint(alice, f"http://127.0.0.1:{free_port()}/hook")
    (first, token), *rest = [new_delivery(endpoint, queued) for _ in range(3)]
    assert engine.deliver_once(first.id, token, batch=engine.BATCH) == "retrying"
    for d, _ in rest:
        d.refresh_from_db()
        assert (d.status, d.attempt_count, d.lease_token, d.lease_until) == ("pending", 0, "", None)
    # Due and unleased: the sweeper queues them (and the retry of the first) again.
    assert sorted(i for i, _ in engine.claim_due()) == sorted([first.id] + [d.id for d, _ in rest])


def test_a_batch_starts_no_attempt_that_could_outlive_its_lease(webhook_settings, receiver, alice, queued):
    # Lease 3 s, timeout 1.5 s, margin 1 s: after a 0.6 s request a second one could end
    # past the lease, so it is not started; the rest go back to the sweeper.
    receiver.behaviour = lambda n: time.sleep(0.6) or 204
    endpoint = make_endpoint(alice, receiver.url)
    (first, token), *rest = [new_delivery(endpoint, queued) for _ in range(3)]
    assert engine.deliver_once(first.id, token, batch=engine.BATCH) == "succeeded"
    assert len(receiver.wait_for(1)) == 1
    time.sleep(0.3)
    assert len(receiver.requests) == 1
    assert all(Delivery.objects.get(id=d.id).lease_token == "" for d, _ in rest)
