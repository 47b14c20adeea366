"""The rate limit's counters beside a SQLite file (apps/access/ratelimit/file_store.py `SharedCounters`):
one count per hit across processes, windows that start from zero, refunds, and a full file."""

from __future__ import annotations

import multiprocessing

import pytest

from apps.access.ratelimit import CountersFull, SharedCounters

WINDOW = 60


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db.sqlite3-ratelimit")


def test_buckets_count_apart_and_windows_start_from_zero(path):
    counters = SharedCounters(path)
    assert counters.add(["a", "b"], 600, WINDOW) == [1, 1]
    assert counters.add(["a"], 600, WINDOW) == [2]
    assert counters.add(["a", "b"], 660, WINDOW) == [1, 1]  # the next window
    assert counters.add(["a"], 600, WINDOW) == [3]  # the previous one is still held
    assert counters.add(["a"], 720, WINDOW) == [1]  # two windows on: its half was cleared
    assert counters.add(["a"], 600, WINDOW, delta=-1) == [0]  # a window no longer held is left alone


def test_another_window_length_starts_from_zero(path):
    """The setting changed (or a test set another): counts of the old length are not read as
    counts of the new one, whichever is later."""
    counters = SharedCounters(path)
    counters.add(["a"], 1_795_000_020, WINDOW)
    assert counters.add(["a"], 1_000_000_000, 10**9) == [1]
    assert counters.add(["a"], 1_795_000_020, WINDOW) == [1]


def test_a_refund_takes_one_back_and_never_goes_below_zero(path):
    counters = SharedCounters(path)
    counters.add(["a"], 600, WINDOW)
    assert counters.add(["a"], 600, WINDOW, delta=-1) == [0]
    assert counters.add(["a"], 600, WINDOW, delta=-1) == [0]
    assert counters.add(["never-counted"], 600, WINDOW, delta=-1) == [0]
    assert counters.add(["a"], 600, WINDOW) == [1]


def test_a_second_mapping_sees_the_same_counts(path):
    SharedCounters(path).add(["a"], 600, WINDOW)
    assert SharedCounters(path).add(["a"], 600, WINDOW) == [2]


def _hammer(path: str, times: int, queue) -> None:
    counters = SharedCounters(path)
    queue.put([counters.add(["shared", f"own-{id(counters)}"], 600, WINDOW)[0] for _ in range(times)])


def test_processes_count_every_hit_once(path):
    SharedCounters(path)  # created before the processes race to create it
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    processes = [context.Process(target=_hammer, args=(path, 400, queue)) for _ in range(3)]
    for process in processes:
        process.start()
    seen = [count for _ in processes for count in queue.get(timeout=120)]
    for process in processes:
        process.join(timeout=120)
    # Every hit saw a different count: no two processes read the same value and wrote it back.
    assert sorted(seen) == list(range(1, 1201))


def test_a_full_file_says_so(path):
    class Small(SharedCounters):
        SLOTS = 4

    counters = Small(path + "-small")
    counters.add(["a", "b", "c", "d"], 600, WINDOW)
    with pytest.raises(CountersFull):
        counters.add(["e"], 600, WINDOW)
    assert counters.add(["e"], 660, WINDOW) == [1]  # the other half is free
