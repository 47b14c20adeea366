"""Stream slots: the per-workspace connection limit, counted across processes and instances.
Synchronous; the hub runs these on its own threads.

Two stores behind one set of functions, chosen like the other shared state (DESIGN.md §2):

- Production (`REDIS_URL`): one Redis sorted set per workspace, a member per open stream
  (`process|holder`) scored by its lease's end. Taking a slot is one atomic script (drop lapsed
  members, refuse at the limit, add), so concurrent opens on any process or instance never hold
  more than the limit; releasing is one ZREM; no database row is written per open. A burst of
  opens (a reconnect storm) takes its slots in one script call (`acquire_slots`), each open
  decided by the same rule, in order.
- Embedded default (no Redis): a `StreamSlot` row per open stream; the database's unique
  `(workspace, number)` arbitrates.

Either way a slot lives exactly as long as a stream the hub of its process holds: the consumer
takes it before the stream is registered and releases it however the consumer ends, and the hub
renews the leases of its live streams' slots only, by id (`renew_leases`). A slot nobody renews
(a killed process, an acquire whose answer was lost) lapses after one lease
(`CONNECT_SSE_SLOT_LEASE_SECONDS`, 45 s by default: "within a minute"). The other way round, an
open stream whose slot is gone (its renewals stalled for a lease) is ended by the hub, and its
client resumes.

A killed process, sooner (Redis): a refused open asks Redis which processes still hold their
connection (`CLIENT LIST`: every hub names its subscription `connect-hub:<process>`), drops the
slots of those that do not, and tries once more; and a hub evicts them at its start (a restart
after a kill). The kernel closes a killed process's sockets at once, so its slots are freed on
the spot and its clients, reconnecting elsewhere, are not refused for the lease's remainder; a
process that is alive keeps its connection however loaded it is, so load never makes it look
dead (a process that loses Redis closes its streams anyway: no carrier).

Race-safe under a storm of refused opens: every refused open retries after an eviction that
began after its refusal (whatever that eviction found: an eviction run by a concurrent open
frees the room just as well), and one eviction at a time per process covers every open refused
before it began, so 5,000 refused opens do not each run `CLIENT LIST`. A member is dropped only
when its process held members before `CLIENT LIST` was read and is absent from it: a hub names
its connection before its process takes a slot, so a process that starts meanwhile is never
taken for dead."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, Max, Min, OuterRef
from django.utils import timezone

from apps.events import fanout
from apps.events.models import StreamSlot

logger = logging.getLogger("connect.events")

SlotId = int | str  # a StreamSlot pk, or "<workspace>|<process>|<holder>" in Redis
HUB_CLIENT_PREFIX = "connect-hub:"


def lease_seconds() -> float:
    return settings.CONNECT_SSE_SLOT_LEASE_SECONDS


def renew_every_seconds() -> float:
    """Three renewals per lease: a live slot survives two missed ones (a busy loop, a database
    hiccup) before it could lapse."""
    return lease_seconds() / 3


def _overdue_window() -> float:
    """A slot whose lease ends sooner than this missed two renewals."""
    return lease_seconds() - 2 * renew_every_seconds()


def hub_client_name(process: str) -> str:
    """The name of a hub's Redis subscription: alive while the process is."""
    return HUB_CLIENT_PREFIX + process


def _redis() -> bool:
    return bool(settings.REDIS_URL)


# --- the public functions ---------------------------------------------------------------------
def acquire_slot(*, workspace_id: int, process: str, limit: int, holder: str) -> SlotId | None:
    """A slot id, or None when the workspace already has `limit` live streams.

    Safe to run again after a failure with the same `holder` (one per stream open): if the
    first run's slot was taken but its answer lost, the retry finds and returns it instead of
    taking a second one."""
    if _redis():
        return _RedisSlots.acquire(workspace_id, process, limit, holder)
    return _db_acquire(workspace_id, process, limit, holder)


def acquire_slots(requests: list[tuple[int, str, int, str]]) -> list[SlotId | None]:
    """`acquire_slot` for each `(workspace_id, process, limit, holder)`, in order, as if one after
    the other: a burst of stream opens (a reconnect storm) takes its slots in one Redis script
    call per try instead of one round trip per open. Each is decided exactly as `acquire_slot`
    alone (the script runs atomically, so opens on other processes and instances interleave only
    between calls, never inside one) and is as safe to run again (`holder`)."""
    if not requests:
        return []
    if _redis():
        return _RedisSlots.acquire_many(requests)
    return [_db_acquire(workspace_id, process, limit, holder) for workspace_id, process, limit, holder in requests]


def overdue_retry_after(*, workspace_id: int) -> int | None:
    """When the workspace is at its limit: seconds until the first of its slots that missed two
    renewals lapses, or None when every slot is renewed on time. Such a slot belongs to a process
    that stopped renewing (a host cut off): its client is reconnecting elsewhere, so the refusal
    is a dependency's transient state (503 with Retry-After), not the workspace's own streams
    (429 connection_limit)."""
    now = timezone.now()
    if _redis():
        first = _RedisSlots.first_overdue_ms(workspace_id, _ms(now))
        seconds = None if first is None else (first - _ms(now)) / 1000
    else:
        overdue = (
            StreamSlot.objects.filter(
                workspace_id=workspace_id,
                lease_expires_at__gte=now,
                lease_expires_at__lt=now + timedelta(seconds=_overdue_window()),
            )
            .order_by("lease_expires_at")
            .values_list("lease_expires_at", flat=True)
            .first()
        )
        seconds = None if overdue is None else (overdue - now).total_seconds()
    if seconds is None:
        return None
    return math.floor(seconds) + 1  # the first whole second past its lapse


def evict_dead_processes() -> int:
    """Redis: drop every workspace's slots held by processes whose hub connection is gone (a hub
    runs this at its start: the processes a restart killed). How many were dropped."""
    if not _redis():
        return 0  # the database store: the leases lapse
    client = fanout.redis_client()
    return sum(_RedisSlots.evict_dead(client, key) for key in _RedisSlots.keys())


def release_slot(slot_id: SlotId) -> None:
    if isinstance(slot_id, str):
        _RedisSlots.release(slot_id)
    else:
        StreamSlot.objects.filter(pk=slot_id).delete()


def renew_leases(*, slot_ids: Iterable[SlotId]) -> int:
    """Extend the leases of these slots (the live streams of one process), and drop lapsed ones.
    Returns how many were renewed."""
    ids = list(slot_ids)
    if _redis():
        return _RedisSlots.renew([i for i in ids if isinstance(i, str)])
    now = timezone.now()
    renewed = (
        StreamSlot.objects.filter(pk__in=ids).update(lease_expires_at=now + timedelta(seconds=lease_seconds()))
        if ids
        else 0
    )
    StreamSlot.objects.filter(lease_expires_at__lt=now).delete()
    return renewed


def existing_slots(slot_ids: Iterable[SlotId]) -> set[SlotId]:
    ids = list(slot_ids)
    if _redis():
        return _RedisSlots.existing([i for i in ids if isinstance(i, str)])
    return set(StreamSlot.objects.filter(pk__in=ids).values_list("pk", flat=True))


def release_process(*, process: str) -> None:
    if _redis():
        _RedisSlots.release_process(process)
    else:
        StreamSlot.objects.filter(process=process).delete()


def open_slots(*, workspace_id: int | None = None) -> int:
    """Live (not lapsed) slots of a workspace, or of every workspace."""
    if _redis():
        return _RedisSlots.count(workspace_id)
    slots = StreamSlot.objects.filter(lease_expires_at__gte=timezone.now())
    if workspace_id is not None:
        slots = slots.filter(workspace_id=workspace_id)
    return slots.count()


# --- the database store (embedded) --------------------------------------------------------------
def _db_acquire(workspace_id: int, process: str, limit: int, holder: str) -> int | None:
    now = timezone.now()
    slots = StreamSlot.objects.filter(workspace_id=workspace_id)
    slots.filter(lease_expires_at__lt=now).delete()
    # By process and holder: holders are counted per process, so another process's open may
    # carry the same holder (its row is never this open's).
    mine = slots.filter(process=process, holder=holder).values_list("pk", flat=True).first()
    if mine is not None:
        return mine
    for number in _free_numbers(workspace_id, limit):
        try:
            with transaction.atomic():
                slot = StreamSlot.objects.create(
                    workspace_id=workspace_id,
                    number=number,
                    process=process,
                    holder=holder,
                    lease_expires_at=now + timedelta(seconds=lease_seconds()),
                )
            return slot.pk
        except IntegrityError:
            # Another connect took this number first, or this open's own row exists already.
            mine = slots.filter(process=process, holder=holder).values_list("pk", flat=True).first()
            if mine is not None:
                return mine
    return None


# Numbers tried from the index alone before reading every row of the workspace.
_INDEXED_TRIES = 8


def _free_numbers(workspace_id: int, limit: int):
    """Numbers in [0, limit) free when asked, each asked again after a concurrent connect took the
    previous one. First from the (workspace, number) index alone — past the highest, below the
    lowest, or the first gap — so an open does not read every open stream's row (it did: O(open
    streams) per open, a sixth of an open's cost at 1,000 streams); then, if connects keep racing
    for the same numbers, every free number from one read of the rows."""
    slots = StreamSlot.objects.filter(workspace_id=workspace_id)
    for _ in range(_INDEXED_TRIES):
        bounds = slots.aggregate(low=Min("number"), high=Max("number"))
        if bounds["low"] is None or bounds["low"] > 0:
            yield 0
        elif bounds["high"] + 1 < limit:
            yield bounds["high"] + 1
        else:
            successor_taken = StreamSlot.objects.filter(workspace_id=workspace_id, number=OuterRef("number") + 1)
            gap = slots.filter(~Exists(successor_taken)).aggregate(first=Min("number"))["first"]
            if gap is None or gap + 1 >= limit:
                return  # full
            yield gap + 1
    taken = set(slots.values_list("number", flat=True))
    yield from (number for number in range(limit) if number not in taken)


# --- the Redis store (production) ---------------------------------------------------------------
def _ms(when) -> int:
    return int(when.timestamp() * 1000)


# KEYS[1]: the workspace's set. ARGV: member, limit, now (ms), lease (ms). 1 taken (or already
# held by this member: a retried acquire), 0 at the limit.
_ACQUIRE = """
local now, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
redis.call('PEXPIRE', KEYS[1], lease + 1000)
return 1
"""
# KEYS: the workspaces' sets. ARGV: now (ms), lease (ms), then per open: its set's index in KEYS
# (1-based), its member, its limit. `_ACQUIRE` for each open in order, in one call; 1 or 0 each.
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
# Opens one `_ACQUIRE_MANY` call takes at most (a script blocks Redis while it runs).
ACQUIRE_BATCH = 500
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
# One eviction at a time in this process; per set, when the last finished one began (monotonic).
_eviction_lock = threading.Lock()
_eviction_began: dict[str, float] = {}


class _RedisSlots:
    @staticmethod
    def prefix() -> str:
        # One namespace per database, like the event channel: deployments sharing a Redis never mix.
        return f"connect:slots:{settings.DATABASES['default']['NAME']}:"

    @classmethod
    def key(cls, workspace_id: int | str) -> str:
        return f"{cls.prefix()}{workspace_id}"

    @staticmethod
    def parse(slot_id: str) -> tuple[str, str]:
        workspace_id, _, member = slot_id.partition("|")
        return workspace_id, member

    @classmethod
    def acquire(cls, workspace_id: int, process: str, limit: int, holder: str) -> str | None:
        client = fanout.redis_client()
        member = f"{process}|{holder}"
        key = cls.key(workspace_id)
        lease_ms = int(lease_seconds() * 1000)
        if not client.eval(_ACQUIRE, 1, key, member, limit, _ms(timezone.now()), lease_ms):
            cls.evict_dead_since(client, key, refused=time.monotonic())
            if not client.eval(_ACQUIRE, 1, key, member, limit, _ms(timezone.now()), lease_ms):
                return None
        return f"{workspace_id}|{member}"

    @classmethod
    def acquire_many(cls, requests: list[tuple[int, str, int, str]]) -> list[str | None]:
        client = fanout.redis_client()
        members = [f"{process}|{holder}" for _, process, _, holder in requests]
        taken = cls._take(client, requests, members, range(len(requests)))
        refused = [i for i, ok in enumerate(taken) if not ok]
        if refused:
            # As `acquire`: a refused open tries once more after an eviction begun after its
            # refusal (one per set, shared with concurrent opens), all of them in one more call.
            when = time.monotonic()
            for key in {cls.key(requests[i][0]) for i in refused}:
                cls.evict_dead_since(client, key, refused=when)
            for i, ok in zip(refused, cls._take(client, requests, members, refused)):
                taken[i] = ok
        return [f"{request[0]}|{member}" if ok else None for request, member, ok in zip(requests, members, taken)]

    @classmethod
    def _take(cls, client, requests, members, which) -> list[bool]:
        which = list(which)
        out: list[bool] = []
        lease_ms = int(lease_seconds() * 1000)
        for start in range(0, len(which), ACQUIRE_BATCH):
            keys: dict[str, int] = {}
            argv: list = []
            for i in which[start:start + ACQUIRE_BATCH]:
                workspace_id, _, limit, _ = requests[i]
                index = keys.setdefault(cls.key(workspace_id), len(keys) + 1)
                argv += [index, members[i], limit]
            result = client.eval(_ACQUIRE_MANY, len(keys), *keys, _ms(timezone.now()), lease_ms, *argv)
            out += [bool(r) for r in result]
        return out

    @classmethod
    def evict_dead_since(cls, client, key: str, *, refused: float) -> None:
        """After a refusal at `refused`: an eviction of this set that began later has run when
        this returns (this one, or a concurrent open's)."""
        with _eviction_lock:
            if _eviction_began.get(key, -math.inf) > refused:
                return  # one that began after the refusal finished while we waited for the lock
            began = time.monotonic()
            gone = cls.evict_dead(client, key)
            _eviction_began[key] = began
        if gone:
            logger.info("freed %d stream slots of processes that are gone", gone)

    @staticmethod
    def evict_dead(client, key: str) -> int:
        """Drop the members of processes whose hub no longer holds its Redis connection. The
        holders are read before the connections, and a hub connects before its process takes a
        slot: a holder missing from the connections read after it has lost its connection."""
        holders = [p.decode() for p in client.eval(_PROCESSES, 1, key)]
        if not holders:
            return 0
        live = {c.get("name", "") for c in client.client_list()}
        dead = [p for p in holders if hub_client_name(p) not in live]
        return client.eval(_EVICT, 1, key, *dead) if dead else 0

    @classmethod
    def first_overdue_ms(cls, workspace_id: int, now_ms: int) -> int | None:
        window_ms = int(_overdue_window() * 1000)
        first = fanout.redis_client().zrangebyscore(
            cls.key(workspace_id), now_ms, f"({now_ms + window_ms}", start=0, num=1, withscores=True
        )
        return int(first[0][1]) if first else None

    @classmethod
    def release(cls, slot_id: str) -> None:
        workspace_id, member = cls.parse(slot_id)
        fanout.redis_client().zrem(cls.key(workspace_id), member)

    @classmethod
    def renew(cls, slot_ids: list[str]) -> int:
        if not slot_ids:
            return 0
        by_key: dict[str, list[str]] = defaultdict(list)
        for slot_id in slot_ids:
            workspace_id, member = cls.parse(slot_id)
            by_key[cls.key(workspace_id)].append(member)
        now, lease_ms = _ms(timezone.now()), int(lease_seconds() * 1000)
        pipe = fanout.redis_client().pipeline(transaction=False)
        for key, members in by_key.items():
            pipe.eval(_RENEW, 1, key, now, lease_ms, *members)
        gone = sum(len(result) for result in pipe.execute())
        return len(slot_ids) - gone

    @classmethod
    def existing(cls, slot_ids: list[str]) -> set[str]:
        if not slot_ids:
            return set()
        now = _ms(timezone.now())
        pipe = fanout.redis_client().pipeline(transaction=False)
        for slot_id in slot_ids:
            workspace_id, member = cls.parse(slot_id)
            pipe.zscore(cls.key(workspace_id), member)
        return {slot_id for slot_id, score in zip(slot_ids, pipe.execute()) if score is not None and score >= now}

    @classmethod
    def keys(cls) -> list[str]:
        return [k.decode() for k in fanout.redis_client().scan_iter(match=cls.prefix() + "*", count=1000)]

    @classmethod
    def release_process(cls, process: str) -> None:
        client = fanout.redis_client()
        for key in cls.keys():
            client.eval(_EVICT, 1, key, process)

    @classmethod
    def count(cls, workspace_id: int | None) -> int:
        client = fanout.redis_client()
        now = _ms(timezone.now())
        keys = [cls.key(workspace_id)] if workspace_id is not None else cls.keys()
        return sum(client.zcount(key, now, "+inf") for key in keys)
