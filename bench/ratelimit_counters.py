"""What one rate-limit hit costs in each store the embedded default (SQLite, no Redis) could
count in, side by side in one run: the file mapped into memory (the earlier design, which a
truncated file kills with SIGBUS), the mapping re-checked under the lock (fstat of the
descriptor against stat of the path, remapped when they differ), the file read and written by
pread/pwrite under the lock (no mapping: the current store), and the SQLite table (one upsert
per hit, the database's own store).

    .venv/bin/python bench/ratelimit_counters.py [--hits 5000] [--rounds 5] [--seconds 3]

Two figures per variant, rounds alternating between variants: microseconds per hit of two
buckets in one process, one thread; and hits per second with two processes counting into the
same buckets at once (as `serve --workers 2`). Prints a markdown table of medians. The database
is a fresh SQLite file, migrated in this process (bench/harness.py `setup_django`).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import mmap
import multiprocessing
import os
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import setup_django  # noqa: E402

WORK = Path(tempfile.mkdtemp(prefix="bench-counters-"))
setup_django(DJANGO_SETTINGS_MODULE="connect.settings", DATABASE_URL=f"sqlite:///{WORK / 'db.sqlite3'}", REDIS_URL="")

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from apps.access.ratelimit.database_store import DatabaseCounters  # noqa: E402
from apps.access.ratelimit.file_store import SharedCounters  # noqa: E402

WINDOW = 60
START = 1_795_000_020
NAMES = ["credential:api_key:bench", "workspace:bench"]


class Mapped:
    """The mapped file as it was: mapped once, never re-checked."""

    SLOTS = 8192
    SLOT = struct.Struct("<16sq")
    HEADER = struct.Struct("<qq")

    def __init__(self, path: str) -> None:
        self.path = path
        self.half = self.HEADER.size + self.SLOTS * self.SLOT.size
        self.lock = threading.Lock()
        self._open()

    def _open(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        if os.fstat(fd).st_size < 2 * self.half:
            os.ftruncate(fd, 2 * self.half)
        self.fd, self.map = fd, mmap.mmap(fd, 2 * self.half)

    def recheck(self) -> None:
        pass

    def add(self, names: list[str], start: int, window: int, delta: int = 1) -> list[int]:
        digests = [hashlib.blake2b(name.encode(), digest_size=16).digest() for name in names]
        base = (start // window) % 2 * self.half
        with self.lock:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                self.recheck()
                if self.HEADER.unpack_from(self.map, base) != (start, window):
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
            if held == digest or held == bytes(16):
                hits = max(0, hits + delta)
                self.SLOT.pack_into(self.map, offset, digest, hits)
                return hits
        raise RuntimeError("full")


class MappedRechecked(Mapped):
    """The mapping, re-checked under the lock: the descriptor is still the file at the path,
    and the file still its full size (else reopened and remapped)."""

    def recheck(self) -> None:
        held = os.fstat(self.fd)
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        if current is None or (current.st_ino, current.st_dev) != (held.st_ino, held.st_dev):
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self.map.close()
            os.close(self.fd)
            self._open()
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        elif held.st_size < 2 * self.half:
            os.ftruncate(self.fd, 2 * self.half)


class Table:
    def __init__(self, path: str) -> None:  # noqa: ARG002
        self.counters = DatabaseCounters()

    def add(self, names: list[str], start: int, window: int, delta: int = 1) -> list[int]:
        return self.counters.add(names, start, window, delta)


VARIANTS = {
    "file, mapped (earlier)": Mapped,
    "file, mapped, re-checked under the lock": MappedRechecked,
    "file, pread/pwrite under the lock (current)": SharedCounters,
    "SQLite table, one upsert per hit": Table,
}


def make(name: str, cls):
    return cls(str(WORK / f"{cls.__name__}.ratelimit"))


def per_hit_us(store, hits: int) -> float:
    for _ in range(200):
        store.add(NAMES, START, WINDOW)
    started = time.perf_counter()
    for _ in range(hits):
        store.add(NAMES, START, WINDOW)
    return (time.perf_counter() - started) / hits * 1e6


def _hammer(name: str, seconds: float, go, queue) -> None:
    connection.close()  # a connection of its own, not the parent's
    store = make(name, VARIANTS[name])
    go.wait()
    deadline = time.monotonic() + seconds
    count = 0
    while time.monotonic() < deadline:
        store.add(NAMES, START, WINDOW)
        count += 1
    queue.put(count)


def two_processes_hits_per_s(name: str, seconds: float) -> float:
    context = multiprocessing.get_context("fork")
    go, queue = context.Event(), context.Queue()
    connection.close()
    workers = [context.Process(target=_hammer, args=(name, seconds, go, queue)) for _ in range(2)]
    for worker in workers:
        worker.start()
    time.sleep(0.5)
    go.set()
    total = sum(queue.get(timeout=seconds + 60) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    return total / seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hits", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    call_command("migrate", "--no-input", verbosity=0)
    stores = {name: make(name, cls) for name, cls in VARIANTS.items()}
    single: dict[str, list[float]] = {name: [] for name in VARIANTS}
    double: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for round_ in range(args.rounds):
        order = list(VARIANTS) if round_ % 2 == 0 else list(reversed(VARIANTS))
        for name in order:
            single[name].append(per_hit_us(stores[name], args.hits))
            double[name].append(two_processes_hits_per_s(name, args.seconds))
    reference = statistics.median(single["file, pread/pwrite under the lock (current)"])
    print("| store | µs per hit, one process | × current | hits/s, two processes at once |")
    print("|---|---|---|---|")
    for name in VARIANTS:
        us = statistics.median(single[name])
        print(f"| {name} | {us:.1f} | {us / reference:.2f} | {statistics.median(double[name]):.0f} |")


if __name__ == "__main__":
    main()
