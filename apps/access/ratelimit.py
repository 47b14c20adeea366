"""Rate limits per credential and per workspace, counted across every server process.

Fixed windows of `CONNECT_RATE_LIMIT_WINDOW_SECONDS`: each authenticated request adds one hit
to its credential's bucket and to its workspace's bucket; it is refused with
`429 {"error": "rate_limited"}` and `Retry-After` when either bucket is past its limit
(`CONNECT_RATE_LIMIT_PER_CREDENTIAL`, `CONNECT_RATE_LIMIT_PER_WORKSPACE`; 0 turns one off).
Refused requests count too, so a client that ignores `Retry-After` stays limited.

Counting costs one round trip per request: a pipelined INCR/EXPIRE of both buckets on Redis
when `REDIS_URL` is set, else one upsert of both rows (`INSERT … ON CONFLICT … RETURNING`) in
PostgreSQL. Both are shared by every process and machine on that Redis or database. On a
SQLite file, whose processes all run on the one machine that holds it, the counters live in a
small file mapped into memory beside it (`SharedCounters`, `<database>-ratelimit`), under an
exclusive `flock`: no database write per request (a write there takes SQLite's one writer lock,
which every other process's request waits behind).

Every entry point counts through `apps.access.admission.admit`, right after the credential
resolves and before scopes (a refused scope still costs a request); the REST adapter and the
consumers put `decision.headers()` on their response.

`headers()` gives `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds until
the window ends) for the tighter of the two buckets, plus `Retry-After` when refused.

A request that turns out to cost nothing, a `304 Not Modified` to a conditional GET, is given
back (`refund_sync`): polling with `If-None-Match` does not use up the limit.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import math
import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import connection, models

from apps.access.principal import Principal
from apps.core.models import RateLimitCounter

logger = logging.getLogger("connect.ratelimit")

HEADER_NAMES = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After")


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int
    # The window the hit was counted in (what a refund takes it back from).
    window_start: int = field(default=0, compare=False)

    def headers(self) -> list[tuple[str, str]]:
        rows = [
            ("RateLimit-Limit", str(self.limit)),
            ("RateLimit-Remaining", str(self.remaining)),
            ("RateLimit-Reset", str(self.reset_seconds)),
        ]
        if not self.allowed:
            rows.append(("Retry-After", str(self.reset_seconds)))
        return rows


def decide(hits_and_limits: list[tuple[int, int]], *, window: int, now: float) -> RateDecision:
    """Pure: the decision for one request from each bucket's hits (this one included) and
    limit. The reported bucket is the one with the fewest requests left."""
    reset = max(1, math.ceil((window_start(now, window) + window) - now))
    allowed = all(hits <= limit for hits, limit in hits_and_limits)
    hits, limit = min(hits_and_limits, key=lambda hl: hl[1] - hl[0])
    return RateDecision(
        allowed=allowed,
        limit=limit,
        remaining=max(0, limit - hits),
        reset_seconds=reset,
        window_start=window_start(now, window),
    )


def window_start(now: float, window: int) -> int:
    return int(now // window) * window


def buckets(principal: Principal) -> list[tuple[str, int]]:
    """(bucket, limit) pairs for the limits that are on."""
    rows = [
        (f"credential:{principal.kind}:{principal.credential_id}", settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL),
        (f"workspace:{principal.workspace.pk}", settings.CONNECT_RATE_LIMIT_PER_WORKSPACE),
    ]
    return [(bucket, limit) for bucket, limit in rows if limit > 0]


# --- Counters --------------------------------------------------------------------------------

_redis_client = None
_redis_lock = threading.Lock()


def _redis():
    global _redis_client
    if _redis_client is None:
        with _redis_lock:
            if _redis_client is None:
                import redis

                _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _redis_client


def count_in_redis(names: list[str], start: int, window: int, hits: int = 1) -> list[int]:
    # Buckets name rows of one database (workspace and credential ids), so its name is part of
    # the key: deployments (and test runs) sharing a Redis never count into each other's.
    database = settings.DATABASES["default"]["NAME"]
    pipe = _redis().pipeline(transaction=False)
    for name in names:
        key = f"connect:ratelimit:{database}:{name}:{start}"
        pipe.incrby(key, hits)
        pipe.expire(key, window * 2)
    replies = pipe.execute()
    return [int(n) for n in replies[0::2]]


class CountersFull(Exception):
    """More buckets in one window than the shared file holds."""


class SharedCounters:
    """Fixed-window hit counters in one file every process of this machine maps, each change
    under an exclusive `flock` of the file (and a thread lock, as `flock` does not exclude the
    threads of one process). Two halves, one per window parity: the first count of a new window
    clears its half, so the previous window stays readable for a refund and nothing else is
    ever deleted. Within a half, buckets are slots found by open addressing on a 16-byte digest
    of the bucket name."""

    SLOTS = 8192  # per half: more distinct buckets than that in one window → CountersFull
    SLOT = struct.Struct("<16sq")  # bucket digest, hits
    HEADER = struct.Struct("<qq")  # the window this half counts: its start and length

    def __init__(self, path: str) -> None:
        self.path = path
        self.half = self.HEADER.size + self.SLOTS * self.SLOT.size
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < 2 * self.half:
                os.ftruncate(fd, 2 * self.half)  # zeros: every slot empty, both halves at window 0
            self.map = mmap.mmap(fd, 2 * self.half)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.lock = threading.Lock()

    def add(self, names: list[str], start: int, window: int, delta: int = 1) -> list[int]:
        """Add `delta` to each bucket in the window beginning at `start`; their new counts.
        A decrement of a window no longer held (its half was cleared since) changes nothing."""
        digests = [hashlib.blake2b(name.encode(), digest_size=16).digest() for name in names]
        base = (start // window) % 2 * self.half
        with self.lock:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                if self.HEADER.unpack_from(self.map, base) != (start, window):
                    if delta < 0:
                        return [0 for _ in names]
                    # A new window (or a new window length: the setting changed) starts from zero.
                    self.map[base : base + self.half] = bytes(self.half)
                    self.HEADER.pack_into(self.map, base, start, window)
                return [self._add(base + self.HEADER.size, digest, delta) for digest in digests]
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _add(self, slots: int, digest: bytes, delta: int) -> int:
        first = int.from_bytes(digest[:8], "little") % self.SLOTS
        for probe in range(self.SLOTS):
            offset = slots + (first + probe) % self.SLOTS * self.SLOT.size
            held, hits = self.SLOT.unpack_from(self.map, offset)
            if held == digest or held == EMPTY:
                if held == EMPTY and delta < 0:
                    return 0
                hits = max(0, hits + delta)
                self.SLOT.pack_into(self.map, offset, digest, hits)
                return hits
        raise CountersFull(self.path)


EMPTY = bytes(16)
_shared: tuple[int, str, SharedCounters] | None = None  # (pid, path, counters): mapped once per process


def shared_counters() -> SharedCounters | None:
    """This process's mapping of the counter file beside the SQLite database; None when the
    database is not a SQLite file (PostgreSQL, or an in-memory test database)."""
    global _shared
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        return None
    path = f"{settings.DATABASES['default']['NAME']}-ratelimit"
    if _shared is None or _shared[0] != os.getpid() or _shared[1] != path:
        _shared = (os.getpid(), path, SharedCounters(path))
    return _shared[2]


_pruned_before = 0  # per process: windows older than this were already deleted


def count_in_database(names: list[str], start: int, window: int, hits: int = 1) -> list[int]:
    global _pruned_before
    table = connection.ops.quote_name(RateLimitCounter._meta.db_table)
    values = ", ".join(["(%s, %s, %s)"] * len(names))
    params: list = []
    for name in names:
        params += [name, start, hits]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (bucket, window_start, hits) VALUES {values} "  # noqa: S608 - names are ours
            f"ON CONFLICT (bucket, window_start) DO UPDATE SET hits = {table}.hits + excluded.hits "
            "RETURNING bucket, hits",
            params,
        )
        hits = dict(cursor.fetchall())
    if _pruned_before < start:
        # Once per window per process: drop rows of windows before the previous one.
        _pruned_before = start
        RateLimitCounter.objects.filter(window_start__lt=start - window).delete()
    return [hits[name] for name in names]


def count_beside_database(names: list[str], start: int, window: int, hits: int = 1) -> list[int]:
    """The shared file on a SQLite database, else (or when the file is full) the database."""
    counters = shared_counters()
    if counters is not None:
        try:
            return counters.add(names, start, window, hits)
        except CountersFull:
            logger.warning("rate limit counted in the database: the shared counter file is full")
    return count_in_database(names, start, window, hits)


def check_rate_limit_sync(principal: Principal, *, now: float | None = None) -> RateDecision | None:
    """Count this request for the principal; None when every limit is off."""
    return check_rate_limits(principal, 1, now=now)[0]


def check_rate_limits(principal: Principal, count: int, *, now: float | None = None) -> list[RateDecision | None]:
    """Count `count` requests of the principal at once (a burst of stream opens admitted together,
    apps/access/admission.admit_each): one counting round trip adds them all, and the i-th is
    decided on the counts it would have seen alone (the buckets' new counts less the requests
    after it). Nones when every limit is off."""
    pairs = buckets(principal)
    if not pairs:
        return [None] * count
    window = settings.CONNECT_RATE_LIMIT_WINDOW_SECONDS
    now = time.time() if now is None else now
    start = window_start(now, window)
    names = [name for name, _ in pairs]
    if settings.REDIS_URL:
        try:
            totals = count_in_redis(names, start, window, count)
        except Exception:  # noqa: BLE001 - Redis down: serve rather than refuse everyone
            logger.warning("rate limit not counted: Redis unavailable", exc_info=True)
            return [None] * count
    else:
        totals = count_beside_database(names, start, window, count)
    return [decide([(total - count + 1 + i, limit) for total, (_, limit) in zip(totals, pairs)], window=window, now=now)
            for i in range(count)]


def refund_sync(principal: Principal, decision: RateDecision | None) -> RateDecision | None:
    """Take back the hit `decision` counted for this request (it was answered `304`): one
    decrement of each bucket in the window it was counted in. Returns the decision the
    response's headers should show."""
    if decision is None or not decision.allowed:
        return decision
    names = [name for name, _ in buckets(principal)]
    if not names:
        return decision
    start = decision.window_start
    if settings.REDIS_URL:
        database = settings.DATABASES["default"]["NAME"]
        try:
            pipe = _redis().pipeline(transaction=False)
            for name in names:
                pipe.decr(f"connect:ratelimit:{database}:{name}:{start}")
            pipe.execute()
        except Exception:  # noqa: BLE001 - as when counting: Redis down, nothing to give back
            logger.warning("rate limit not refunded: Redis unavailable", exc_info=True)
            return decision
    else:
        counters = shared_counters()
        if counters is not None:
            # (A hit the file was full for went to the database and is not given back: the
            # limit errs on the strict side, without a database write per 304.)
            counters.add(names, start, settings.CONNECT_RATE_LIMIT_WINDOW_SECONDS, delta=-1)
        else:
            RateLimitCounter.objects.filter(bucket__in=names, window_start=start, hits__gt=0).update(
                hits=models.F("hits") - 1
            )
    return replace(decision, remaining=min(decision.limit, decision.remaining + 1))
