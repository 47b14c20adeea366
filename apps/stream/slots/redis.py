"""The production store (`REDIS_URL`): one sorted set per workspace, a member per open stream
(`process|holder`) scored by its lease's end. Taking slots is one atomic script (drop lapsed
members, refuse at the limit, add), so opens on any process or instance never hold more than
the limit; no database row is written per open.

A process is alive while its hub holds its named Redis connection (`hub_client_name`): the hub
names it before its process takes a slot, so a member is dropped as dead only when its process
held members before `CLIENT LIST` was read and is absent from it. A refused open retries once
after an eviction of dead processes that began after its refusal (one eviction at a time per
process, shared by every open refused before it began)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import defaultdict

from django.conf import settings
from django.utils import timezone

from apps.core.redis_clients import redis_client
from apps.stream.slots.base import Acquire, SlotStore, lease_seconds, overdue_window

logger = logging.getLogger("connect.events")

HUB_CLIENT_PREFIX = "connect-hub:"
# Opens one `_ACQUIRE_MANY` call takes at most (a script blocks Redis while it runs).
ACQUIRE_BATCH = 500


def hub_client_name(process: str) -> str:
    """The name of a hub's Redis subscription: alive while the process is."""
    return HUB_CLIENT_PREFIX + process


# KEYS: the workspaces' sets. ARGV: now (ms), lease (ms), then per open: its set's index in KEYS
# (1-based), its member, its limit. For each open in order: 1 taken (or already held by this
# member: a retried acquire), 0 at the limit.
_ACQUIRE_MANY = """
local now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 1, #KEYS do redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. now) end
local out = {}
for i = 3, #ARGV, 3 do
  local key, member = KEYS[tonumber(ARGV[i])], ARGV[i + 1]
  if redis.call('ZSCORE', key, member) then
    out[#out + 1] = 1
  elseif redis.call('ZCARD', key) >= tonumber(ARGV[i + 2]) then
    out[#out + 1] = 0
  else
    redis.call('ZADD', key, now + lease, member)
    redis.call('PEXPIRE', key, lease + 1000)
    out[#out + 1] = 1
  end
end
return out
"""
# KEYS[1]: the workspace's set. ARGV: now (ms), lease (ms), members… Extends the members still
# present, drops lapsed ones; returns the members that were gone.
_RENEW = """
local now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
local gone = {}
for i = 3, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  else
    gone[#gone + 1] = ARGV[i]
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], lease + 1000) end
return gone
"""
# KEYS[1]: the workspace's set. The distinct processes holding its members (`process|holder`).
_PROCESSES = """
local seen, out = {}, {}
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local process = string.match(member, '^([^|]*)|')
  if process and not seen[process] then
    seen[process] = true
    out[#out + 1] = process
  end
end
return out
"""
# KEYS[1]: the workspace's set. ARGV: processes (dead, or one releasing its own). Drops their
# members; returns how many.
_EVICT = """
local dead, gone = {}, 0
for i = 1, #ARGV do dead[ARGV[i]] = true end
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local process = string.match(member, '^([^|]*)|')
  if process and dead[process] then
    redis.call('ZREM', KEYS[1], member)
    gone = gone + 1
  end
end
return gone
"""


def _ms(when) -> int:
    return int(when.timestamp() * 1000)


def _parse(slot_id: str) -> tuple[str, str]:
    workspace_id, _, member = slot_id.partition("|")
    return workspace_id, member


class RedisSlots(SlotStore):
    def __init__(self) -> None:
        # One eviction at a time in this process; per set, when the last finished one began.
        self._eviction_lock = threading.Lock()
        self._eviction_began: dict[str, float] = {}

    @staticmethod
    def prefix() -> str:
        # One namespace per database, like the event channel: deployments sharing a Redis never mix.
        return f"connect:slots:{settings.DATABASES['default']['NAME']}:"

    @classmethod
    def key(cls, workspace_id: int | str) -> str:
        return f"{cls.prefix()}{workspace_id}"

    @classmethod
    def keys(cls) -> list[str]:
        return [k.decode() for k in redis_client().scan_iter(match=cls.prefix() + "*", count=1000)]

    def acquire_many(self, requests: list[Acquire]) -> list[str | None]:
        client = redis_client()
        members = [f"{process}|{holder}" for _, process, _, holder in requests]
        taken = self._take(client, requests, members, range(len(requests)))
        refused = [i for i, ok in enumerate(taken) if not ok]
        if refused:
            # Each refused open tries once more after an eviction begun after its refusal (one
            # per set, shared with concurrent opens), all of them in one more call.
            when = time.monotonic()
            for key in {self.key(requests[i][0]) for i in refused}:
                self._evict_dead_since(client, key, refused=when)
            for i, ok in zip(refused, self._take(client, requests, members, refused)):
                taken[i] = ok
        return [f"{request[0]}|{member}" if ok else None for request, member, ok in zip(requests, members, taken)]

    def _take(self, client, requests: list[Acquire], members: list[str], which) -> list[bool]:
        which = list(which)
        out: list[bool] = []
        lease_ms = int(lease_seconds() * 1000)
        for start in range(0, len(which), ACQUIRE_BATCH):
            keys: dict[str, int] = {}
            argv: list = []
            for i in which[start:start + ACQUIRE_BATCH]:
                workspace_id, _, limit, _ = requests[i]
                index = keys.setdefault(self.key(workspace_id), len(keys) + 1)
                argv += [index, members[i], limit]
            result = client.eval(_ACQUIRE_MANY, len(keys), *keys, _ms(timezone.now()), lease_ms, *argv)
            out += [bool(r) for r in result]
        return out

    def _evict_dead_since(self, client, key: str, *, refused: float) -> None:
        """After a refusal at `refused`: an eviction of this set that began later has run when
        this returns (this one, or a concurrent open's)."""
        with self._eviction_lock:
            if self._eviction_began.get(key, -math.inf) > refused:
                return  # one that began after the refusal finished while we waited for the lock
            began = time.monotonic()
            gone = self._evict_dead(client, key)
            self._eviction_began[key] = began
        if gone:
            logger.info("freed %d stream slots of processes that are gone", gone)

    @staticmethod
    def _evict_dead(client, key: str) -> int:
        """Drop the members of processes whose hub no longer holds its Redis connection. The
        holders are read before the connections: a holder missing from the connections read
        after it has lost its connection."""
        holders = [p.decode() for p in client.eval(_PROCESSES, 1, key)]
        if not holders:
            return 0
        live = {c.get("name", "") for c in client.client_list()}
        dead = [p for p in holders if hub_client_name(p) not in live]
        return client.eval(_EVICT, 1, key, *dead) if dead else 0

    def evict_dead_processes(self) -> int:
        client = redis_client()
        return sum(self._evict_dead(client, key) for key in self.keys())

    def release(self, slot_id: str) -> None:
        workspace_id, member = _parse(slot_id)
        redis_client().zrem(self.key(workspace_id), member)

    def renew(self, slot_ids: list) -> int:
        slot_ids = [i for i in slot_ids if isinstance(i, str)]
        if not slot_ids:
            return 0
        by_key: dict[str, list[str]] = defaultdict(list)
        for slot_id in slot_ids:
            workspace_id, member = _parse(slot_id)
            by_key[self.key(workspace_id)].append(member)
        now, lease_ms = _ms(timezone.now()), int(lease_seconds() * 1000)
        pipe = redis_client().pipeline(transaction=False)
        for key, members in by_key.items():
            pipe.eval(_RENEW, 1, key, now, lease_ms, *members)
        gone = sum(len(result) for result in pipe.execute())
        return len(slot_ids) - gone

    def existing(self, slot_ids: list) -> set[str]:
        slot_ids = [i for i in slot_ids if isinstance(i, str)]
        if not slot_ids:
            return set()
        now = _ms(timezone.now())
        pipe = redis_client().pipeline(transaction=False)
        for slot_id in slot_ids:
            workspace_id, member = _parse(slot_id)
            pipe.zscore(self.key(workspace_id), member)
        return {slot_id for slot_id, score in zip(slot_ids, pipe.execute()) if score is not None and score >= now}

    def release_process(self, process: str) -> None:
        client = redis_client()
        for key in self.keys():
            client.eval(_EVICT, 1, key, process)

    def count(self, workspace_id: int | None) -> int:
        client = redis_client()
        now = _ms(timezone.now())
        keys = [self.key(workspace_id)] if workspace_id is not None else self.keys()
        return sum(client.zcount(key, now, "+inf") for key in keys)

    def overdue_seconds(self, workspace_id: int) -> float | None:
        now = _ms(timezone.now())
        first = redis_client().zrangebyscore(
            self.key(workspace_id), now, f"({now + int(overdue_window() * 1000)}", start=0, num=1, withscores=True
        )
        return None if not first else (int(first[0][1]) - now) / 1000
