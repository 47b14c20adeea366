"""A `subscriptions/listen` open makes the hub jobs an event stream's open makes (admission,
slot) and one more, its database read (which of the sessions it watches are the workspace's:
Hub.read_shared). A burst of them shares that read, as a burst of event stream opens shares its
admission and its slots: the opens asking while the hub's threads are busy make one job, an
open asking once that job has started gets a job of its own, and another workspace's session
is never known. Real hub threads, real database; the opens run in this process (asgiref's
communicator, the hub on the test's loop)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from asgiref.testing import ApplicationCommunicator

from apps.access.credentials import invalid_credentials
from apps.mcp import listen
from apps.mcp.consumer import McpEndpoint
from apps.stream import slots
from apps.stream.consumer import EventStreamConsumer
from apps.stream.hub import get_hub
from tests import factories
from tests.events.live import STREAM
from tests.hub import run_on_hub
from tests.mcp.streams import headers_for, listen_body
from tests.servers import forget_rate_limit_counts

pytestmark = pytest.mark.django_db(transaction=True)  # the hub's threads read what was committed

WAIT = 20


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

    known, later, resume_reads = run_on_hub(scenario())
    assert reads == [sessions, sessions]  # one job for the burst, one for the open after it
    assert known == [frozenset({ours.id})] * 5 and later == frozenset({ours.id})
    assert resume_reads == 0  # not counted as the resumes' reads


def record_jobs(hub) -> list[str]:
    """The jobs submitted to the hub's threads from now on (their functions' names), but for the
    hub's own background ones: the follower's polls and the maintenance's."""
    background = {slots.renew_leases, slots.existing_slots, slots.evict_dead_processes, invalid_credentials}
    jobs: list[str] = []
    submit = hub.db.submit

    def recording(job):
        fn = job.args[0]  # Hub.run_db's job: partial(db_job, fn, retry, ...)
        if getattr(fn, "__self__", None) is not hub.follower and fn not in background:
            jobs.append(fn.__qualname__)
        return submit(job)

    hub.db.submit = recording
    return jobs


async def opened(app: ApplicationCommunicator, request: dict) -> bytes:
    await app.send_input(request)
    start = await app.receive_output(timeout=WAIT)
    assert start["status"] == 200, start
    return (await app.receive_output(timeout=WAIT))["body"]


async def close(app: ApplicationCommunicator) -> None:
    await app.send_input({"type": "http.disconnect"})
    await app.wait(timeout=WAIT)


def test_a_listen_open_makes_an_event_streams_jobs_and_its_sessions_read(acme, alice_key):
    forget_rate_limit_counts()
    meeting = factories.session(acme)
    body = listen_body(uris=[f"connect://sessions/{meeting.id}/transcript"])
    mcp_headers = [(name.lower().encode(), value.encode()) for name, value in headers_for(alice_key, body).items()]

    async def scenario():
        hub = get_hub()
        await hub.ensure_carrier()  # as the first open does; its jobs are not an open's
        jobs = record_jobs(hub)
        events = ApplicationCommunicator(EventStreamConsumer.as_asgi(), {
            "type": "http", "method": "GET", "path": STREAM, "query_string": b"",
            "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {alice_key}".encode())]})
        assert await opened(events, {"type": "http.request", "body": b""}) == b": connected\n\n"
        event_stream_jobs = list(jobs)
        jobs.clear()
        listening = ApplicationCommunicator(McpEndpoint(), {
            "type": "http", "method": "POST", "path": "/mcp", "query_string": b"",
            "headers": [(b"host", b"127.0.0.1"), *mcp_headers]})
        first = await opened(listening, {"type": "http.request", "body": json.dumps(body).encode()})
        listen_jobs = list(jobs)
        await close(events)
        await close(listening)
        return event_stream_jobs, listen_jobs, first

    event_stream_jobs, listen_jobs, first = run_on_hub(scenario())
    assert event_stream_jobs == ["SharedAdmit.run", "SharedAcquire.run"]
    assert listen_jobs == ["SharedAdmit.run", "SharedResume.run", "SharedAcquire.run"]  # + the sessions read
    assert b"notifications/subscriptions/acknowledged" in first and meeting.id.encode() in first
