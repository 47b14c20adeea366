"""Follow session events with the async client until interrupted, reading each completed
session's board summaries as it completes.

    export CONNECT_BASE_URL=http://127.0.0.1:8000 CONNECT_API_KEY=svc_…
    python follow_events_async.py
"""

from __future__ import annotations

import asyncio

from connect_client import AsyncConnect, Event
from connect_client.types import Filter

FILTERS: list[Filter] = [
    {"type": "session.created"},
    {"type": "session.status_changed", "status": ["completed"]},
]


async def on_event(client: AsyncConnect, event: Event) -> None:
    print(event.id, event.type, event.session_id)
    if event.type == "session.status_changed":
        for board in await client.boards.list(event.session_id):
            print("  board", board.board_id, "version", board.version, board.status)


async def main() -> None:
    async with AsyncConnect() as client:  # CONNECT_BASE_URL, CONNECT_API_KEY
        async for event in client.events.stream(filters=FILTERS):
            await on_event(client, event)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
