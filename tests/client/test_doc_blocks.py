"""The client block at the top of docs/events.md, run as written (only the base URL and the key
substituted) against a live `serve`. docs/webhooks.md's runs in test_webhooks.py, beside the
server with a task cluster that sends it deliveries."""

from __future__ import annotations

import threading
import time

import pytest

from tests import docs, factories

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
        from django.db import connection

        try:
            while not done.is_set():
                if namespace.get("stream") is not None and namespace["stream"].connections:
                    factories.session(acme, completed=True)
                    return
                time.sleep(0.05)
        finally:
            connection.close()  # else PostgreSQL cannot drop the test database at the end

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


def test_the_client_readme_read_block_runs(live, acme, key):
    """clients/python/README.md's first example, as written (base URL and key substituted)."""
    from tests.client.installed import SOURCE

    factories.session(acme, final=["We agreed on the budget."])
    [first, *_] = [b for b in docs.blocks(SOURCE / "README.md") if b.info == "python"]
    printed: list[tuple] = []
    namespace: dict = {"print": lambda *args: printed.append(args)}
    exec(compile(first.text.replace(BASE, live.url).replace("svc_…", key), "README.md", "exec"), namespace)  # noqa: S102
    namespace["client"].close()
    assert printed[1] == ("Speaker 1", "We agreed on the budget.")
    assert printed[2][1].startswith("We agreed on the budget")
