"""The project's Redis clients, built in one place with one set of options.

- `redis_client()`: this process's synchronous client (redis-py), made on first use and made
  anew when `REDIS_URL` changes. Shared by every thread; redis-py's pool hands each thread its
  own connection and, after a fork, drops the parent's connections (it checks the pid), so a
  forked child never writes on its parent's socket.
- `async_redis_client()`: a new `redis.asyncio` client for one event loop, which its caller
  owns and closes. An asyncio connection belongs to the loop that opened it, so it is not
  shared; a `client_name` names the connection (a process's liveness can be read from it).

Short timeouts on both: a Redis that stops answering fails a call in seconds rather than
holding a request (or a readiness probe) for the kernel's TCP timeout.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings

SOCKET_TIMEOUT_SECONDS = 2
CONNECT_TIMEOUT_SECONDS = 2
ASYNC_CONNECT_TIMEOUT_SECONDS = 5

_lock = threading.Lock()
_client: Any = None
_client_url: str | None = None


def redis_client() -> Any:
    """This process's synchronous client for `settings.REDIS_URL`."""
    global _client, _client_url
    with _lock:
        if _client is None or _client_url != settings.REDIS_URL:
            import redis

            _client = redis.Redis.from_url(
                settings.REDIS_URL, socket_timeout=SOCKET_TIMEOUT_SECONDS, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS
            )
            _client_url = settings.REDIS_URL
        return _client


def async_redis_client(*, client_name: str | None = None) -> Any:
    """A new asyncio client for `settings.REDIS_URL`; the caller closes it (`aclose()`)."""
    import redis.asyncio as aioredis

    return aioredis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=ASYNC_CONNECT_TIMEOUT_SECONDS, client_name=client_name
    )
