"""A Channels HTTP consumer that never joins a channel layer and always ends in `disconnect()`.

Channels' `AsyncConsumer.__call__` subscribes every consumer to the channel layer (a Redis
receive per connection in production, and a Redis drop inside it ended the consumer without
`disconnect()`), and its `dispatch` closes the thread's old database connections for every
message (a thread hop each). A consumer that needs neither (its database work runs elsewhere,
nothing is sent to it through a layer) subclasses `LayerlessHttpConsumer`: `__call__` reads
the client's messages only and ends in a `finally` that runs `disconnect()` however the
consumer ends (StopConsumer, an exception, the task cancelled).

Relies on, read in channels 4.3 (pinned by tests/test_engine_pins.py):
- `AsyncConsumer.send` writes through `self.base_send`, and AsyncHttpConsumer's `send_headers`
  and `send_body` go through `send`; `__call__` is where the stock consumer sets `scope`,
  `channel_layer` and `base_send`, and it is the only place that joins the layer;
- `channels.consumer.get_handler_name(message)` maps a message type to its handler's name.
"""

from __future__ import annotations

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer


class LayerlessHttpConsumer(AsyncHttpConsumer):
    async def __call__(self, scope, receive, send) -> None:
        self.scope = scope
        self.channel_layer = None
        self.base_send = send
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass
        finally:
            await self.disconnect()

    async def dispatch(self, message) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)
