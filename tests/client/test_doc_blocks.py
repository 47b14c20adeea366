"""The client blocks at the top of docs/events.md and docs/webhooks.md, run as written (only the
base URL, the key and the JWKS URL substituted) against a live `serve`."""

from __future__ import annotations

import threading
import time

import pytest

from tests import docs, factories
from tests.servers import start
from tests.webhooks.conftest import LIVE_ENV, fresh_process_caches, webhook_settings  # noqa: F401
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BASE = "https://connect.example.com"


def test_events_page_client_block_prints_live_events(live, acme, key):
    code = docs.block(docs.ROOT / "docs" / "events.md", "python connect-client")
    code = code.replace(BASE, live.url).replace("svc_…", key)
    printed: list[tuple] = []
    namespace: dict = {}

    def fake_print(*args):
        printed.append(args)
        if len(printed) == 2:
            namespace["stream"].close()  # the reader's Ctrl-C

    namespace["print"] = fake_print
    done = threading.Event()

    def produce():
        while not done.is_set():
            if namespace.get("stream") is not None and namespace["stream"].connections:
                factories.session(acme, completed=True)
                return
            time.sleep(0.05)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        exec(compile(code, "docs/events.md", "exec"), namespace)  # noqa: S102 - our own documentation
    finally:
        done.set()
        producer.join(timeout=30)
        namespace["client"].close()
    assert [p[1] for p in printed] == ["session.created", "session.status_changed"]
    assert all(p[0].startswith("evt_") for p in printed)


def test_webhooks_page_client_block_verifies_a_real_delivery(acme, key, tmp_path, webhook_settings):  # noqa: F811
    import connect_client

    server = start(tmp_path, tasks=True, env=LIVE_ENV)
    jwks_url = f"{server.url}/.well-known/webhook-signing-keys.json"
    receiver = Receiver(jwks_url)
    try:
        code = docs.block(docs.ROOT / "docs" / "webhooks.md", "python connect-client")
        namespace: dict = {"print": lambda *args: None}
        exec(compile(code.replace(f"{BASE}/.well-known/webhook-signing-keys.json", jwks_url), "docs/webhooks.md",
                     "exec"), namespace)  # noqa: S102
        with connect_client.Connect(server.url, api_key=key) as client:
            client.webhooks.create(name="doc", url=receiver.url, filters=[{"type": "session.created"}])
        factories.session(acme)
        [request] = receiver.wait_for(1, timeout=90)
        assert namespace["receive"](request.headers, request.body) == 204
        assert namespace["receive"](request.headers, request.body[:-1] + b" ") == 400
    finally:
        receiver.close()
        server.stop()
