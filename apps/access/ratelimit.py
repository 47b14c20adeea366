"""Rate limits per credential and per workspace, counted across every server process.

Fixed windows of `CONNECT_RATE_LIMIT_WINDOW_SECONDS`: each authenticated request adds one hit
to its credential's bucket and to its workspace's bucket; it is refused with
`429 {"error": "rate_limited"}` and `Retry-After` when either bucket is past its limit
(`CONNECT_RATE_LIMIT_PER_CREDENTIAL`, `CONNECT_RATE_LIMIT_PER_WORKSPACE`; 0 turns one off).
Refused requests count too, so a client that ignores `Retry-After` stays limited.

Counting costs one round trip per request: a pipelined INCR/EXPIRE of both buckets on Redis
when `REDIS_URL` is set, else one upsert of both rows (`INSERT … ON CONFLICT … RETURNING`) in
the database. Both are shared by every process and machine on that Redis or database.

Every entry point counts through `apps.access.admission.admit`, right after the credential
resolves and before scopes (a refused scope still costs a request); the REST adapter and the
consumers put `decision.headers()` on their response.

`headers()` gives `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds until
the window ends) for the tighter of the two buckets, plus `Retry-After` when refused.

A request that turns out to cost nothing, a `304 Not Modified` to a conditional GET, is given
back (`refund_sync`): polling with `If-None-Match` does not use up the limit.
"""

from __future__ import annotations

import logging
import math
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


def count_in_redis(names: list[str], start: int, window: int) -> list[int]:
    # Buckets name rows of one database (workspace and credential ids), so its name is part of
    # the key: deployments (and test runs) sharing a Redis never count into each other's.
    database = settings.DATABASES["default"]["NAME"]
    pipe = _redis().pipeline(transaction=False)
    for name in names:
        key = f"connect:ratelimit:{database}:{name}:{start}"
        pipe.incr(key)
        pipe.expire(key, window * 2)
    replies = pipe.execute()
    return [int(n) for n in replies[0::2]]


_pruned_before = 0  # per process: windows older than this were already deleted


def count_in_database(names: list[str], start: int, window: int) -> list[int]:
    global _pruned_before
    table = connection.ops.quote_name(RateLimitCounter._meta.db_table)
    values = ", ".join(["(%s, %s, 1)"] * len(names))
    params: list = []
    for name in names:
        params += [name, start]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (bucket, window_start, hits) VALUES {values} "  # noqa: S608 - names are ours
            f"ON CONFLICT (bucket, window_start) DO UPDATE SET hits = {table}.hits + 1 "
            "RETURNING bucket, hits",
            params,
        )
        hits = dict(cursor.fetchall())
    if _pruned_before < start:
        # Once per window per process: drop rows of windows before the previous one.
        _pruned_before = start
        RateLimitCounter.objects.filter(window_start__lt=start - window).delete()
    return [hits[name] for name in names]


def check_rate_limit_sync(principal: Principal, *, now: float | None = None) -> RateDecision | None:
    """Count this request for the principal; None when every limit is off."""
    pairs = buckets(principal)
    if not pairs:
        return None
    window = settings.CONNECT_RATE_LIMIT_WINDOW_SECONDS
    now = time.time() if now is None else now
    start = window_start(now, window)
    names = [name for name, _ in pairs]
    if settings.REDIS_URL:
        try:
            counts = count_in_redis(names, start, window)
        except Exception:  # noqa: BLE001 - Redis down: serve rather than refuse everyone
            logger.warning("rate limit not counted: Redis unavailable", exc_info=True)
            return None
    else:
        counts = count_in_database(names, start, window)
    return decide([(hits, limit) for hits, (_, limit) in zip(counts, pairs)], window=window, now=now)


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
        RateLimitCounter.objects.filter(bucket__in=names, window_start=start, hits__gt=0).update(
            hits=models.F("hits") - 1
        )
    return replace(decision, remaining=min(decision.limit, decision.remaining + 1))
