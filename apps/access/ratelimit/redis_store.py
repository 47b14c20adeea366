"""Counters in Redis: one key per bucket and window, shared by every process and machine on
that Redis. A hit is one pipelined INCRBY/EXPIRE per bucket; a refund decrements only a key
that holds hits, so it never creates a key or takes one below zero."""

from __future__ import annotations

from django.conf import settings

from apps.access.ratelimit.store import CountersUnavailable
from apps.core.redis_clients import redis_client

# Decrement each key that holds hits; a key gone (expired) or at zero is left alone.
REFUND = """
for i = 1, #KEYS do
  local hits = tonumber(redis.call('GET', KEYS[i]) or '0')
  if hits > 0 then redis.call('DECR', KEYS[i]) end
end
return 0
"""


def key(name: str, start: int) -> str:
    # Buckets name rows of one database (workspace and credential ids), so its name is part of
    # the key: deployments (and test runs) sharing a Redis never count into each other's.
    return f"connect:ratelimit:{settings.DATABASES['default']['NAME']}:{name}:{start}"


class RedisCounters:
    def add(self, names: list[str], start: int, window: int, hits: int = 1) -> list[int]:
        try:
            pipe = redis_client().pipeline(transaction=False)
            for name in names:
                pipe.incrby(key(name, start), hits)
                pipe.expire(key(name, start), window * 2)
            replies = pipe.execute()
        except Exception as exc:  # noqa: BLE001 - any client or connection failure
            raise CountersUnavailable("Redis unavailable") from exc
        return [int(n) for n in replies[0::2]]

    def refund(self, names: list[str], start: int, window: int) -> None:  # noqa: ARG002 - the key expires on its own
        try:
            redis_client().eval(REFUND, len(names), *[key(name, start) for name in names])
        except Exception as exc:  # noqa: BLE001
            raise CountersUnavailable("Redis unavailable") from exc
