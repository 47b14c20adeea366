"""A stream resumed with `Last-Event-ID` misses nothing and repeats nothing when transactions
commit out of order (issue 21's open gap): transaction A records its event first and commits
last, B records and commits in between. A stream that delivered B before A and was resumed
after B skipped A (the log reads after B's place, and A sits below it); delivered in commit
order and resumed after A, it got B twice. Streams now carry events in log order (the hub's
follower, apps/stream/hub.py), so the client's last id is a place in the log, and resume reads
after it as REST does.

PostgreSQL only: on SQLite one writer holds the write lock at a time, so B cannot commit while
A is open (the order this test builds cannot happen). With REDIS_URL set it runs the production
carrier (a commit announced on Redis wakes every process's follower)."""

from __future__ import annotations

import pytest
from django.db import connection

from apps.events.models import Event
from tests import factories
from tests.events.live import start_server, wait_until
from tests.holders import Holder, end_holders  # noqa: F401 - autouse: no holder outlives its test

pytestmark = pytest.mark.django_db(transaction=True)

# How long the first stream is given to show B (today's follower delivers a settled event within
# milliseconds; the old Redis carrier delivered B at once). Not a timing assertion: the test
# passes whether or not B arrives in this window, as long as the union is exact.
SHOW_B_SECONDS = 3


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    live = start_server(tmp_path_factory.mktemp("events-resume-order"))
    yield live
    live.stop()


def session_created_id(session) -> str:
    return Event.objects.get(session_id=session.id, type="session.created").id


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite commits one writer at a time")
def test_resume_after_out_of_order_commits_misses_nothing_and_repeats_nothing(server, readers, acme, alice_key):
    first = readers(server, alice_key)
    assert first.status == 200
    before = factories.session(acme)
    first.wait(lambda r: any(e.id == session_created_id(before) for e in r.events), what="the first event")

    held = Holder(acme.id, "held")  # A: its transaction takes the smaller id and stays open
    later = factories.session(acme)  # B: records after A and commits first
    b_id, a_id = session_created_id(later), held.event_id
    try:
        first.wait(lambda r: r.events[-1].id == b_id, what="B", timeout=SHOW_B_SECONDS)
    except AssertionError:
        pass  # held back until A settles: the order of the log
    first.close()
    last_id = first.events[-1].id
    held.commit()

    resumed = readers(server, alice_key, last_event_id=last_id)
    assert resumed.status == 200
    got = lambda: [e.id for e in first.events + resumed.events if e.id in (a_id, b_id)]  # noqa: E731
    try:
        resumed.wait(lambda r: len(got()) >= 2, what="A and B across both streams")
    finally:
        assert "resume-unavailable" not in resumed.comments
    wait_until(lambda: len(got()) >= 2, what="A and B")
    assert sorted(got()) == sorted([a_id, b_id]), (last_id, got())  # each exactly once
    # Both in log order: A (the older transaction) before B.
    assert got() == [a_id, b_id]
