"""Each rate-limit counter store behind its one face: hits add up per bucket and window, and a
refund gives back at most what its window counted (never below zero, never in a window or
bucket that holds nothing)."""

from __future__ import annotations

import pytest
from django.conf import settings

from apps.access.ratelimit import counter_store
from apps.access.ratelimit.database_store import DatabaseCounters
from apps.access.ratelimit.file_store import BesideDatabase, SharedCounters
from apps.access.ratelimit.redis_store import RedisCounters, key
from apps.core.redis_clients import redis_client

WINDOW = 60
START = 1_795_000_020


@pytest.fixture(params=["database", "file", "redis"])
def store(request, db, tmp_path):
    if request.param == "database":
        yield DatabaseCounters()
        return
    if request.param == "file":
        yield SharedCounters(str(tmp_path / "db.sqlite3-ratelimit"))
        return
    if not settings.REDIS_URL:
        pytest.skip("no REDIS_URL")
    keys = [key(name, start) for name in ("a", "b") for start in (START, START + WINDOW)]
    redis_client().delete(*keys)
    yield RedisCounters()
    redis_client().delete(*keys)


def refund(store, names, start):
    if isinstance(store, SharedCounters):
        store.add(names, start, WINDOW, -1)
    else:
        store.refund(names, start, WINDOW)


def test_hits_add_up_per_bucket_and_window(store):
    assert store.add(["a", "b"], START, WINDOW) == [1, 1]
    assert store.add(["a"], START, WINDOW, 3) == [4]
    assert store.add(["a", "b"], START + WINDOW, WINDOW) == [1, 1]


def test_refunds_never_exceed_the_hits_counted(store):
    store.add(["a", "b"], START, WINDOW, 2)
    for _ in range(5):
        refund(store, ["a", "b"], START)
    assert store.add(["a", "b"], START, WINDOW) == [1, 1]  # two hits, five refunds: back to none
    refund(store, ["a"], START + WINDOW)  # a window that counted nothing gives nothing back
    assert store.add(["a"], START + WINDOW, WINDOW) == [1]


def test_the_store_is_chosen_once_for_the_configuration(db):
    assert counter_store() is counter_store()
    chosen = counter_store()
    if settings.REDIS_URL:
        assert isinstance(chosen, RedisCounters)
    else:
        assert isinstance(chosen, BesideDatabase | DatabaseCounters)
