"""How a committed event reaches every server process.

Two carriers, one per deployment (DESIGN.md §2):

- production (`REDIS_URL` set): the committing process publishes the ready-made envelope on one
  Redis pub/sub channel; every server process holds exactly one subscription to it
  (`hub.py`). No database read per event.
- embedded default (no Redis): every server process follows the outbox table itself (one
  follower thread per process, `hub.py`); a commit made inside a server process also wakes that
  process's follower at once, others see it on their next poll.

`announce_committed` runs after commit (`transaction.on_commit` in `services.record_event`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import orjson
from django.conf import settings

from apps.events.models import Event
from apps.events.representations import frame_for

logger = logging.getLogger("connect.events")

_publisher_lock = threading.Lock()
_publisher: Any = None
_publisher_url: str | None = None
# Set by the running hub of this process (if any), called from any thread after a commit.
local_wakeups: list = []


def redis_channel() -> str:
    # One channel per database, so two deployments (or test runs) sharing a Redis never mix.
    return f"connect:events:{settings.DATABASES['default']['NAME']}"


def wire_message(event: Event) -> bytes:
    """What travels on Redis: a one-line routing header, then the ready SSE frame, so a
    server process routes and writes it without parsing or re-serialising the envelope."""
    header = orjson.dumps({"i": event.id, "w": event.workspace_id, "t": event.type, "s": event.session_id})
    return header + b"\n" + frame_for(event)


def redis_client():
    """This process's synchronous Redis client (publishing, stream slots), made on first use."""
    global _publisher, _publisher_url
    with _publisher_lock:
        if _publisher is None or _publisher_url != settings.REDIS_URL:
            import redis

            _publisher = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
            _publisher_url = settings.REDIS_URL
        return _publisher


def announce_committed(event: Event) -> None:
    if settings.REDIS_URL:
        try:
            redis_client().publish(redis_channel(), wire_message(event))
        except Exception:  # noqa: BLE001 - the event is committed; live delivery is best effort
            logger.exception("could not publish %s to Redis; open streams miss it (resume still has it)", event.id)
    for wake in list(local_wakeups):
        wake()
