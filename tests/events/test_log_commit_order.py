"""No poller ever skips an event (apps/events/selectors.py): transactions commit out of id
order, and a poller following `nextCursor` still gets every event exactly once, in one stable
order. Proven on the database the suite runs on: PostgreSQL (one producer's transaction held
open while another commits: the horizon hides the later one) and SQLite (two processes: the
second writer waits for the first, and its row goes after it whatever its id)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from apps.events.models import Event, EventType, new_event_id
from apps.events.selectors import position_on_insert
from tests import factories
from tests.holders import Holder, end_holders  # noqa: F401
from tests.servers import ROOT, server_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/v1/events"
WAIT = 120


class Producer(threading.Thread):
    """Producer B, on its own connection: inserts its event (with an id made when it was
    created) in a transaction that commits when `release` is set."""

    def __init__(self, workspace_id, *, hold: bool) -> None:
        super().__init__(daemon=True)
        self.event_id = new_event_id()
        self.workspace_id = workspace_id
        self.inserted, self.release = threading.Event(), threading.Event()
        if not hold:
            self.release.set()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with transaction.atomic():
                Event.objects.create(id=self.event_id, workspace_id=self.workspace_id, type="session.created",
                                     session_id="second", occurred_at=timezone.now(), data={"sessionId": "second"},
                                     position=position_on_insert())
                self.inserted.set()
                self.release.wait(WAIT)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            connection.close()


def poll(api, key, after, *, unsettled: str | None = None):
    response = api.get(URL, key, **({"after": after} if after else {}))
    assert response.status_code == 200, response.content
    if unsettled is not None:
        assert response["Events-Unsettled"] == unsettled
    body = response.json()
    return [item["id"] for item in body["items"]], body["nextCursor"]


def poll_until(api, key, after, count: int) -> tuple[list[str], str]:
    """Follow the cursor until `count` events came (another transaction of the cluster, a
    parallel test run's, may hold the horizon back for a moment: later, never skipped)."""
    received: list[str] = []

    def more():
        nonlocal after
        items, after = poll(api, key, after)
        received.extend(items)
        return len(received) >= count

    wait_until(more, what=f"{count} events", timeout=WAIT, every=0.05)
    return received, after


# Rate limits off: without Redis they are counted in the database, and a request that writes
# would wait for the write lock the held transaction has (only reads are under test here).
@override_settings(CONNECT_RATE_LIMIT_PER_CREDENTIAL=0, CONNECT_RATE_LIMIT_PER_WORKSPACE=0)
def test_an_event_that_commits_late_is_neither_skipped_nor_repeated(api, acme, alice_key):
    factories.session(acme)
    _, cursor = poll_until(api, alice_key, None, 1)  # settled (a cluster's long transaction may delay it)
    received: list[str] = []

    if connection.vendor == "postgresql":
        holder = Holder(acme.id, "held")  # A: recorded first (smaller id, smaller transaction id), still open
        second = Producer(acme.id, hold=False)
        second.start()
        second.join(WAIT)
        assert second.error is None and Event.objects.filter(pk=second.event_id).exists()  # B committed
        assert holder.event_id < second.event_id
        # B is committed and visible, but A's open transaction holds the horizon below it.
        items, cursor = poll(api, alice_key, cursor, unsettled="true")  # "more is coming: page again"
        assert items == []
        holder.commit()
        items, cursor = poll_until(api, alice_key, cursor, 2)
        received += items
    else:
        second = Producer(acme.id, hold=True)  # B's id is made now: smaller than A's
        holder = Holder(acme.id, "held")
        assert second.event_id < holder.event_id
        second.start()  # waits for the write lock A holds
        items, cursor = poll(api, alice_key, cursor, unsettled="false")  # B cannot even commit
        assert items == []
        holder.commit()
        assert second.inserted.wait(WAIT), "B never got the write lock"
        items, cursor = poll(api, alice_key, cursor)  # B inserted, not committed: A only
        assert items == [holder.event_id]
        received += items
        second.release.set()
        second.join(WAIT)
        assert second.error is None
        items, cursor = poll_until(api, alice_key, cursor, 1)  # B, though its id sorts before A's
        received += items

    assert received == [holder.event_id, second.event_id]
    assert poll(api, alice_key, cursor)[0] == []
    # The order is stable: a full read from the start lists them the same way.
    everything, _ = poll(api, alice_key, None)
    assert everything[-2:] == received


def test_concurrent_producers_and_a_poller_every_50_ms_agree_with_the_full_listing(api, acme, alice_key):
    """Two `simulate_activity` processes write sessions, segments and status changes at once
    while a poller follows `after`; at the end, what it collected is the full listing: nothing
    missed, nothing twice."""
    env = server_env()
    producers = [
        subprocess.Popen([sys.executable, "manage.py", "simulate_activity", "acme", "--sessions", "2",
                          "--interval", "0.01", "--segments", "15"], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    collected: list[str] = []
    cursor = None
    stop = threading.Event()

    def follow() -> None:
        nonlocal cursor
        items, cursor = poll(api, alice_key, cursor)
        collected.extend(items)

    while any(p.poll() is None for p in producers):
        follow()
        stop.wait(0.05)
    for p in producers:
        assert p.wait(timeout=WAIT) == 0, p.stderr.read()
    total = Event.objects.filter(workspace=acme, type__in=EventType.values).count()  # the public log
    wait_until(lambda: follow() or len(collected) >= total, what="the poller to catch up", timeout=WAIT, every=0.05)

    full, cursor_all = [], None
    while True:
        response = api.get(URL, alice_key, limit=100, **({"after": cursor_all} if cursor_all else {}))
        body = response.json()
        if not body["items"]:
            break
        full += [i["id"] for i in body["items"]]
        cursor_all = body["nextCursor"]
    assert len(collected) == len(set(collected)) == total
    assert collected == full


def test_after_an_id_the_stream_sent_before_an_older_transaction_ended_skips_nothing(api, acme, alice_key):
    """PostgreSQL: the stream (Redis) sends events in commit order, so a client may hold the id
    of an event committed while an older transaction still runs, and catch up with
    `after=<that id>`. The older transaction's event still comes (the later one may come
    again: deduplicate on the id)."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer: a committed event is always settled")
    holder = Holder(acme.id, "held")
    second = Producer(acme.id, hold=False)
    second.start()
    second.join(WAIT)
    assert second.error is None
    items, cursor = poll(api, alice_key, second.event_id)  # the id the stream sent last
    assert items == []
    holder.commit()
    received, _ = poll_until(api, alice_key, cursor, 1)
    assert holder.event_id in received and len(received) == len(set(received))
