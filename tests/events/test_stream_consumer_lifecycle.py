"""However the stream's consumer ends, its stream and slot end with it: it depends on no channel
layer (one whose receive fails, as Redis's does when Redis drops, used to kill it without
`disconnect()`), and a consumer cancelled by its server (daphne cancels an application that
outlives its connection) still releases. The consumer runs in this process through asgiref's
communicator, its hub on the test's event loop."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.layers import BaseChannelLayer
from django.test import override_settings

from apps.stream import hub as hub_module
from apps.stream import maintenance
from apps.stream.consumer import EventStreamConsumer
from apps.stream import slots
from tests.events.live import STREAM
from tests.hub import own_hub  # noqa: F401

# Each test's hub lives on that test's loop and is stopped with it.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("own_hub")]

WAIT = 20


class DroppedRedisLayer(BaseChannelLayer):
    """A channel layer whose Redis is gone: every call fails as channels_redis's do then."""

    extensions = ["groups", "flush"]

    async def new_channel(self, prefix="specific."):
        return f"{prefix}dropped"

    async def receive(self, channel):
        raise ConnectionError("Redis went away")

    async def send(self, channel, message):
        raise ConnectionError("Redis went away")

    async def group_add(self, group, channel):
        raise ConnectionError("Redis went away")

    async def group_discard(self, group, channel):
        raise ConnectionError("Redis went away")

    async def flush(self):
        pass


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def open_stream(key: str) -> ApplicationCommunicator:
    app = ApplicationCommunicator(EventStreamConsumer.as_asgi(), {
        "type": "http", "method": "GET", "path": STREAM, "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {key}".encode())],
    })
    await app.send_input({"type": "http.request", "body": b""})
    start = await app.receive_output(timeout=WAIT)
    assert start["status"] == 200, start
    assert (await app.receive_output(timeout=WAIT))["body"] == b": connected\n\n"
    return app


async def until(predicate, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def slot_rows() -> int:
    # On the hub's thread, which hands its connection back after each job (an async ORM call
    # would leave one open on asgiref's thread past the test database's teardown).
    return await hub_module._hub.run_db(slots.open_slots)


async def slots_free() -> bool:
    return await slot_rows() == 0


@pytest.mark.anyio
@override_settings(
    CHANNEL_LAYERS={"default": {"BACKEND": "tests.events.test_stream_consumer_lifecycle.DroppedRedisLayer"}},
    CONNECT_SSE_HEARTBEAT_SECONDS=1,
)
async def test_a_failing_channel_layer_does_not_touch_the_stream(acme, alice_key):
    app = await open_stream(alice_key)
    assert await slot_rows() == 1
    # A heartbeat a second later: the consumer outlived the channel layer's failing receive.
    assert (await app.receive_output(timeout=WAIT))["body"] == b": ping\n\n"
    assert not app.future.done()
    await app.send_input({"type": "http.disconnect"})
    await app.wait(timeout=WAIT)
    await until(slots_free, "the slot to be released")
    assert hub_module._hub.stream_count == 0


@pytest.mark.anyio
async def test_a_cancelled_consumer_releases_its_stream_and_slot(acme, alice_key):
    app = await open_stream(alice_key)
    assert await slot_rows() == 1 and hub_module._hub.stream_count == 1
    app.future.cancel()  # what daphne's application_checker does to an app that lingers
    await until(slots_free, "the cancelled consumer's slot to be released")
    assert hub_module._hub.stream_count == 0
    assert hub_module._hub.live_slot_ids() == []


@pytest.mark.anyio
async def test_a_stream_whose_slot_row_is_gone_ends_at_the_next_renewal(acme, alice_key):
    app = await open_stream(alice_key)
    hub = hub_module._hub
    await hub.run_db(slots.release_process, process=hub.process)  # as if its renewals had stalled for a whole lease
    await maintenance.renew_leases(hub_module._hub)
    end = await app.receive_output(timeout=WAIT)
    assert end == {"type": "http.response.body", "body": b"", "more_body": False}
    assert hub_module._hub.stream_count == 0
    await app.send_input({"type": "http.disconnect"})
    await app.wait(timeout=WAIT)
