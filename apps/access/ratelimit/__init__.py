"""Rate limits per credential and per workspace, counted across every server process.

Fixed windows of `CONNECT_RATE_LIMIT_WINDOW_SECONDS`: each authenticated request adds one hit
to its credential's bucket and to its workspace's bucket; it is refused with
`429 {"error": "rate_limited"}` and `Retry-After` when either bucket is past its limit
(`CONNECT_RATE_LIMIT_PER_CREDENTIAL`, `CONNECT_RATE_LIMIT_PER_WORKSPACE`; 0 turns one off).
Refused requests count too, so a client that ignores `Retry-After` stays limited. Every entry
point counts through `apps.access.admission.admit`, before scopes (a refused scope still costs
a request). Hits are counted in one store per process (`counter_store()`: Redis, the file
beside a SQLite database, or the database), one round trip per request.

A request answered `304 Not Modified` to a tag it named is given back (`refund_sync`), in the
window it was counted in; a refund never takes a bucket below zero, so refunds never exceed
the hits that window counted.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import connection

from apps.access.principal import Principal
from apps.access.ratelimit.database_store import DatabaseCounters
from apps.access.ratelimit.file_store import BesideDatabase, CountersFull, SharedCounters
from apps.access.ratelimit.redis_store import RedisCounters
from apps.access.ratelimit.store import CounterStore, CountersUnavailable

__all__ = [
    "HEADER_NAMES", "CounterStore", "CountersFull", "CountersUnavailable", "RateDecision", "SharedCounters",
    "buckets", "check_rate_limit_sync", "check_rate_limits", "counter_store", "decide", "refund_sync",
    "shared_counters", "window_start",
]  # fmt: skip

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


_chosen: tuple[tuple, CounterStore] | None = None
_choosing = threading.Lock()


def counter_store() -> CounterStore:
    """This process's store, chosen once per configuration (a forked child, or a test that
    changes `REDIS_URL` or the database, gets its own)."""
    global _chosen
    config = (os.getpid(), settings.REDIS_URL, connection.vendor, str(settings.DATABASES["default"]["NAME"]))
    chosen = _chosen
    if chosen is None or chosen[0] != config:
        with _choosing:  # one store (one open counter file) per process, whichever thread asks first
            if _chosen is None or _chosen[0] != config:
                _chosen = (config, choose_store())
            chosen = _chosen
    return chosen[1]


def choose_store() -> CounterStore:
    if settings.REDIS_URL:
        return RedisCounters()
    if connection.vendor == "sqlite" and not connection.is_in_memory_db():
        return BesideDatabase(f"{settings.DATABASES['default']['NAME']}-ratelimit")
    return DatabaseCounters()


def shared_counters() -> SharedCounters | None:
    """This process's counter file beside the SQLite database; None on any other store."""
    store = counter_store()
    return store.counters() if isinstance(store, BesideDatabase) else None


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
    try:
        totals = counter_store().add(names, start, window, count)
    except CountersUnavailable:
        # Redis down: serve rather than refuse everyone.
        logger.warning("rate limit not counted: its store is unavailable", exc_info=True)
        return [None] * count
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
    try:
        counter_store().refund(names, decision.window_start, settings.CONNECT_RATE_LIMIT_WINDOW_SECONDS)
    except CountersUnavailable:
        logger.warning("rate limit not refunded: its store is unavailable", exc_info=True)
        return decision
    return replace(decision, remaining=min(decision.limit, decision.remaining + 1))
