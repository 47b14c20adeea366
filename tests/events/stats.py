"""`GET /api/v1/events/_stats`, served by the test servers only (tests/asgi.py): a server
process's open streams, queued frames and live delivery tasks, so tests can see that a stream's
end, however abrupt, frees everything it held."""

from __future__ import annotations

import asyncio
import gc

import orjson

from apps.stream.hub import current_hub
from apps.stream.live import LiveStream
from apps.stream.streams import Stream

PATH = "/api/v1/events/_stats"


def _runs_a_consumer(task: asyncio.Task) -> bool:
    awaited = task.get_coro()
    while awaited is not None:
        if getattr(awaited, "__qualname__", "").startswith("EventStreamConsumer."):
            return True
        awaited = getattr(awaited, "cr_await", None)
    return False


async def stream_stats(scope, receive, send) -> None:
    hub = current_hub()
    body = hub.stats() if hub is not None else {"streams": 0, "queued": 0}
    tasks = [t for t in asyncio.all_tasks() if not t.done()]
    body["deliveryTasks"] = sum(1 for t in tasks if getattr(t.get_coro(), "__qualname__", "") == "EventStreamConsumer.deliver")
    # Tasks running a stream consumer anywhere down their await chain (daphne's task per request
    # runs the door, the router, then the consumer): a live stream under daphne has none.
    body["streamTasks"] = sum(1 for t in tasks if _runs_a_consumer(t))
    body["tasks"] = len(tasks)
    # What a stream leaves behind in memory once it is gone: none of its objects.
    gc.collect()
    body["streamObjects"] = sum(1 for o in gc.get_objects() if type(o) in (Stream, LiveStream))
    # daphne's ASGI input queues alive (one per request whose application may still read it).
    body["inputQueues"] = sum(1 for o in gc.get_objects() if type(o) is asyncio.Queue)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": orjson.dumps(body)})


def with_stream_stats(application):
    """`application`, with `PATH` answered by `stream_stats` in front of it."""

    async def app(scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] == PATH:
            return await stream_stats(scope, receive, send)
        return await application(scope, receive, send)

    return app
