"""A burst of `subscriptions/listen` opens shares its one database read (which of the sessions
it watches are the workspace's: Hub.read_shared), as a burst of event stream opens shares its
admission and its slots: the opens asking while the hub's threads are busy make one job, an
open asking once that job has started gets a job of its own, and another workspace's session
is never known. Real hub threads, real database."""

from __future__ import annotations

import asyncio
import threading

import pytest

from apps.mcp import listen
from apps.stream import hub as hub_module
from apps.stream.hub import get_hub
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)  # the hub's threads read what was committed


def run_on_hub(scenario):
    try:
        return asyncio.run(scenario())
    finally:
        if hub_module._hub is not None:
            hub_module._hub.shutdown()
        hub_module._hub = None


def test_a_bursts_listen_opens_share_one_sessions_read_and_another_workspaces_session_is_unknown(acme, globex):
    ours, theirs = factories.session(acme), factories.session(globex)
    sessions = frozenset({ours.id, theirs.id})
    key = ("listen-sessions", acme.id, sessions)
    reads: list[frozenset[str]] = []

    def counted(**kwargs):
        reads.append(kwargs["sessions"])
        return listen.known_sessions(**kwargs)

    async def scenario():
        hub = get_hub()
        held = []
        for _ in range(2):  # both hub threads busy: what asks meanwhile waits in one job
            busy = threading.Event()
            held.append((busy, hub.run_db(busy.wait, 30)))
        burst = [asyncio.ensure_future(hub.read_shared(key, counted, workspace_id=acme.id, sessions=sessions))
                 for _ in range(5)]
        await asyncio.sleep(0.05)
        for busy, blocker in held:
            busy.set()
            await blocker
        known = await asyncio.gather(*burst)
        later = await hub.read_shared(key, counted, workspace_id=acme.id, sessions=sessions)
        return known, later, hub.resume_reads

    known, later, resume_reads = run_on_hub(scenario)
    assert reads == [sessions, sessions]  # one job for the burst, one for the open after it
    assert known == [frozenset({ours.id})] * 5 and later == frozenset({ours.id})
    assert resume_reads == 0  # not counted as the resumes' reads
