"""Webhook management through the client (create, get, list, update, delete, test, replay,
recover, deliveries) and `connect_client.webhooks.verify` on real deliveries from a live `serve`
with its task cluster: a genuine request, a tampered body, a stale timestamp, a missing or
malformed header, an unknown kid, and a kid the cached key set does not know yet because the
key was rotated. The WSGI and Django receiver examples receive real deliveries too."""

from __future__ import annotations

import importlib.util
import threading
from datetime import datetime, timedelta, timezone
from wsgiref.simple_server import WSGIRequestHandler, make_server

import connect_client
import pytest
from connect_client import webhooks

from apps.webhooks import keys
from tests import docs, factories
from tests.client.installed import SOURCE
from tests.servers import start
from tests.webhooks.conftest import LIVE_ENV, fresh_process_caches, wait_until, webhook_settings  # noqa: F401
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def hooks_server(django_db_setup, django_db_blocker, tmp_path_factory):
    server = start(tmp_path_factory.mktemp("client-webhooks"), tasks=True, env=LIVE_ENV)
    yield server
    server.stop()


@pytest.fixture
def jwks_url(hooks_server) -> str:
    return f"{hooks_server.url}/.well-known/webhook-signing-keys.json"


@pytest.fixture
def receiver(jwks_url, webhook_settings):  # noqa: F811 - the imported fixture
    r = Receiver(jwks_url)
    yield r
    r.close()


@pytest.fixture
def hooks(hooks_server, key):
    with connect_client.Connect(hooks_server.url, api_key=key, timeout=30) as c:
        yield c


def settled(client, delivery_id):
    return lambda: client.deliveries.get(delivery_id).status not in ("pending", "retrying")


def test_manage_an_endpoint_end_to_end(hooks, receiver, acme):
    created = hooks.webhooks.create(name="ready", url=receiver.url,
                                    filters=[{"type": "session.status_changed", "status": ["completed"]},
                                             connect_client.WebhookFilter(type="session.created")])
    assert created.id.startswith("wh_") and created.active and created.name == "ready"
    assert [f.type for f in created.filters] == ["session.status_changed", "session.created"]
    assert created.filters[0].status == ["completed"] and created.created_at.tzinfo is not None
    assert hooks.webhooks.get(created.id) == created
    other = hooks.webhooks.create(name="other", url=receiver.url, filters=[{"type": "session.created"}])
    assert {w.id for w in hooks.webhooks.list(limit=1)} == {created.id, other.id}  # across two pages

    renamed = hooks.webhooks.update(created.id, name="renamed")
    assert renamed.name == "renamed" and renamed.updated_at >= created.updated_at
    hooks.webhooks.delete(other.id)
    with pytest.raises(connect_client.NotFound):
        hooks.webhooks.get(other.id)

    test = hooks.webhooks.test(created.id)
    assert (test.kind, test.endpoint_id) == ("test", created.id) and test.id.startswith("dlv_")
    wait_until(settled(hooks, test.id))
    read = hooks.deliveries.get(test.id)
    assert read.status == "succeeded" and read.attempts[0].attempt_number == 1
    assert read.attempts[0].http_status == 204 and read.attempts[0].started_at.tzinfo is not None
    with pytest.raises(connect_client.NotAllowed) as refused:
        hooks.deliveries.replay(test.id)  # test deliveries are not replayed
    assert refused.value.status == 409

    session = factories.session(acme)
    [delivery] = wait_until(lambda: list(hooks.deliveries.list(endpoint_id=created.id, kind="event")))
    assert (delivery.event_type, delivery.attempts) == ("session.created", None)
    wait_until(settled(hooks, delivery.id))
    assert [d.id for d in hooks.deliveries.list(status="succeeded", endpoint_id=created.id, kind="event")] == \
        [delivery.id]
    replayed = hooks.webhooks.replay(delivery.id)
    assert replayed.event_id == delivery.event_id and replayed.id != delivery.id
    wait_until(lambda: len([r for r in receiver.requests if r.headers.get("Svc-Event-Id") == delivery.event_id]) == 2)
    assert all(r.verified for r in receiver.requests)
    assert hooks.events.get(delivery.event_id).session_id == session.id

    since = datetime.now(timezone.utc) - timedelta(hours=1)
    recovery = hooks.webhooks.recover(created.id, since=since)
    assert (recovery.queued, recovery.more) == (0, False)  # nothing failed, nothing to queue again
    hooks.webhooks.update(created.id, active=False)
    with pytest.raises(connect_client.NotAllowed):
        hooks.webhooks.recover(created.id, since=since)
    with pytest.raises(connect_client.InvalidRequest) as bad:
        hooks.webhooks.recover(created.id, since="yesterday")
    assert bad.value.detail


def test_create_errors_are_typed(hooks, receiver, alice):
    with pytest.raises(connect_client.InvalidRequest) as caught:
        hooks.webhooks.create(name="x", url="ftp://example.com/hook", filters=[{"type": "session.created"}])
    assert caught.value.detail.startswith("url")
    reader = factories.api_key(alice, ["svc:webhooks:read", "svc:sessions:read"])
    with connect_client.Connect(hooks.base_url, api_key=reader) as client:
        with pytest.raises(connect_client.InsufficientScope):
            client.webhooks.create(name="x", url=receiver.url, filters=[{"type": "session.created"}])


def delivered(hooks, receiver, acme, count):
    """`count` real, signed deliveries of session.created events to `receiver`."""
    hooks.webhooks.create(name="verify", url=receiver.url, filters=[{"type": "session.created"}])
    for _ in range(count):
        factories.session(acme)
    return receiver.wait_for(count, timeout=90)


def test_verify_a_real_delivery_and_each_way_it_fails(hooks, receiver, acme, jwks_url):
    [request] = delivered(hooks, receiver, acme, 1)
    event = webhooks.verify(request.headers, request.body, jwks_url=jwks_url)
    assert isinstance(event, connect_client.Event) and event.id == request.headers["Svc-Event-Id"]
    assert event.type == "session.created" and event.session_id == event.data["sessionId"]
    assert event.session.id == event.session_id and event.occurred_at.tzinfo is not None
    lower = {name.lower(): value for name, value in request.headers.items()}
    assert webhooks.verify(lower, request.body, jwks_url=jwks_url).id == event.id  # any header case
    document = hooks._transport.http.get("/.well-known/webhook-signing-keys.json").json()
    assert webhooks.verify(request.headers, request.body, keys=document).id == event.id

    with pytest.raises(connect_client.errors.InvalidSignature):
        webhooks.verify(request.headers, request.body.replace(b'"session.created"', b'"session.deleted"'),
                        jwks_url=jwks_url)
    with pytest.raises(connect_client.errors.InvalidSignature):
        webhooks.verify(request.headers, request.body + b" ", jwks_url=jwks_url)
    signed_at = int(request.headers["Svc-Signature"].split(",")[0][2:])
    with pytest.raises(connect_client.errors.TimestampOutsideTolerance):
        webhooks.verify(request.headers, request.body, jwks_url=jwks_url, now=signed_at + 301)
    with pytest.raises(connect_client.errors.TimestampOutsideTolerance):
        webhooks.verify(request.headers, request.body, jwks_url=jwks_url, now=signed_at - 301)
    assert webhooks.verify(request.headers, request.body, jwks_url=jwks_url, now=signed_at + 299).id == event.id
    with pytest.raises(connect_client.errors.MissingSignature):
        webhooks.verify({}, request.body, jwks_url=jwks_url)
    with pytest.raises(connect_client.errors.MalformedSignature):
        webhooks.verify({"Svc-Signature": "v1=abc"}, request.body, jwks_url=jwks_url)
    with pytest.raises(TypeError):
        webhooks.verify(request.headers, request.body.decode(), jwks_url=jwks_url)
    errors = [connect_client.errors.InvalidSignature, connect_client.errors.TimestampOutsideTolerance,
              connect_client.errors.MissingSignature, connect_client.errors.MalformedSignature,
              connect_client.errors.UnknownKeyId, connect_client.errors.InvalidPayload]
    assert len(set(errors)) == 6 and all(issubclass(e, connect_client.WebhookVerificationError) for e in errors)


def test_an_unknown_kid_refetches_once_then_a_rotated_key_verifies(hooks, receiver, acme, jwks_url):
    keyset = webhooks.KeySet(jwks_url, min_refresh_seconds=0)
    [first] = delivered(hooks, receiver, acme, 1)
    webhooks.verify(first.headers, first.body, keys=keyset)
    assert keyset.fetches == 1
    webhooks.verify(first.headers, first.body, keys=keyset)
    assert keyset.fetches == 1  # cached

    forged = first.headers["Svc-Signature"].replace("kid=", "kid=nope")
    with pytest.raises(connect_client.errors.UnknownKeyId):
        webhooks.verify({"Svc-Signature": forged}, first.body, keys=keyset)
    assert keyset.fetches == 2  # refetched once for it, then refused

    old_kid = first.headers["Svc-Signature"].split("kid=")[1].split(",")[0]
    new_kid = keys.rotate().kid
    assert new_kid != old_kid
    factories.session(acme)
    second = receiver.wait_for(2, timeout=90)[1]
    assert f"kid={new_kid}" in second.headers["Svc-Signature"]
    assert webhooks.verify(second.headers, second.body, keys=keyset).type == "session.created"
    assert keyset.fetches == 3  # the unknown (new) kid refetched the set once
    assert webhooks.verify(first.headers, first.body, keys=keyset)  # the retiring key still verifies

    throttled = webhooks.KeySet(jwks_url)  # the default: at most one refetch per 10 s
    webhooks.verify(first.headers, first.body, keys=throttled)
    for _ in range(3):
        with pytest.raises(connect_client.errors.UnknownKeyId):
            webhooks.verify({"Svc-Signature": forged}, first.body, keys=throttled)
    assert throttled.fetches == 1


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", SOURCE / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def test_the_wsgi_receiver_example_receives_real_deliveries(hooks, acme, jwks_url, webhook_settings):  # noqa: F811
    example = load_example("wsgi_receiver")
    example.JWKS_URL = jwks_url
    webhooks._keysets.clear()  # this test's database has keys of its own: no set cached by an earlier test
    handled = []
    example.handle = handled.append
    server = make_server("127.0.0.1", 0, example.app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        endpoint = hooks.webhooks.create(name="wsgi", url=url, filters=[{"type": "session.created"}])
        session = factories.session(acme)
        wait_until(lambda: handled)
        assert handled[0].session_id == session.id
        [delivery] = hooks.deliveries.list(endpoint_id=endpoint.id)
        wait_until(settled(hooks, delivery.id))
        assert hooks.deliveries.get(delivery.id).status == "succeeded"
        hooks.deliveries.replay(delivery.id)  # the same event again: deduplicated
        wait_until(lambda: len(list(hooks.deliveries.list(endpoint_id=endpoint.id, status="succeeded"))) == 2)
        assert len(handled) == 1
    finally:
        server.shutdown()
        server.server_close()


def test_the_django_receiver_example_accepts_genuine_and_refuses_tampered(hooks, receiver, acme, jwks_url, rf):
    [request] = delivered(hooks, receiver, acme, 1)
    example = load_example("django_receiver")
    example.JWKS_URL = jwks_url
    webhooks._keysets.clear()
    handled = []
    example.handle = handled.append
    headers = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in request.headers.items()
               if name.lower() not in ("content-type", "content-length")}
    genuine = rf.post("/hooks/connect", data=request.body, content_type="application/json", **headers)
    assert example.connect_webhook(genuine).status_code == 204
    assert handled[0].id == request.headers["Svc-Event-Id"]
    tampered = rf.post("/hooks/connect", data=request.body + b"\n", content_type="application/json", **headers)
    assert example.connect_webhook(tampered).status_code == 400
    assert example.connect_webhook(rf.get("/hooks/connect")).status_code == 405


def test_webhooks_page_client_block_verifies_a_real_delivery(hooks, receiver, acme, jwks_url):
    """docs/webhooks.md's client block, run as written (the JWKS URL substituted)."""
    code = docs.block(docs.ROOT / "docs" / "webhooks.md", "python connect-client")
    code = code.replace("https://connect.example.com/.well-known/webhook-signing-keys.json", jwks_url)
    namespace: dict = {"print": lambda *args: None}
    exec(compile(code, "docs/webhooks.md", "exec"), namespace)  # noqa: S102 - our own documentation
    webhooks._keysets.clear()  # this test's database has keys of its own
    [request] = delivered(hooks, receiver, acme, 1)
    assert namespace["receive"](request.headers, request.body) == 204
    assert namespace["receive"](request.headers, request.body[:-1] + b" ") == 400


def test_the_async_client_manages_webhooks_too(hooks_server, key, receiver):
    import asyncio

    async def scenario():
        async with connect_client.AsyncConnect(hooks_server.url, api_key=key) as client:
            hook = await client.webhooks.create(name="async", url=receiver.url, filters=[{"type": "session.created"}])
            assert (await client.webhooks.get(hook.id)).name == "async"
            assert [w.id async for w in client.webhooks.list()] == [hook.id]
            assert (await client.webhooks.update(hook.id, name="renamed")).name == "renamed"
            test = await client.webhooks.test(hook.id)
            assert (await client.deliveries.get(test.id)).kind == "test"
            assert [d.id async for d in client.deliveries.list(kind="test")] == [test.id]
            with pytest.raises(connect_client.NotAllowed):
                await client.webhooks.replay(test.id)
            since = datetime.now(timezone.utc) - timedelta(minutes=5)
            assert (await client.webhooks.recover(hook.id, since=since)).queued == 0
            await client.webhooks.delete(hook.id)
            with pytest.raises(connect_client.NotFound):
                await client.webhooks.get(hook.id)

    asyncio.run(scenario())
