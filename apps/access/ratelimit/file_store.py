"""Counters in one file beside a SQLite database (`<database>-ratelimit`), shared by the
processes of the machine that holds it with no database write per request (a write there takes
SQLite's one writer lock). When the file cannot count, the database does (`BesideDatabase`).

Every change happens under an exclusive `flock` (and a thread lock: `flock` does not exclude
one process's threads), by `pread`/`pwrite`, never a mapping: a file cut short reads short, it
cannot fault the process. Under the lock each change first checks that its descriptor is still
the file at the path (deleted or replaced: reopen, so every process counts in one file) and
that the file is whole (size, window headers); a damaged file is logged once, by the process
that heals it, and counting starts again from zero.

Layout: two window headers, then two halves of slots, one per window parity; the first count
of a new window clears its half, so the previous window stays readable for a refund. A bucket
is a slot found by open addressing on a digest of its name.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import struct
import threading

from apps.access.ratelimit.database_store import DatabaseCounters
from apps.access.ratelimit.store import CountersUnavailable

logger = logging.getLogger("connect.ratelimit")

EMPTY = bytes(16)


class CountersFull(CountersUnavailable):
    """More buckets in one window than the shared file holds."""


class SharedCounters:
    SLOTS = 8192  # per half: more distinct buckets than that in one window → CountersFull
    SLOT = struct.Struct("<16sq")  # bucket digest, hits
    HEADER = struct.Struct("<qq")  # the window a half counts: its start and length
    PROBE_RUN = 4  # slots read at once while probing

    def __init__(self, path: str) -> None:
        self.path = path
        self.half = self.SLOTS * self.SLOT.size
        self.slots_at = 2 * self.HEADER.size
        self.size = self.slots_at + 2 * self.half
        self.lock = threading.Lock()
        self.fd: int | None = None
        self.identity: tuple[int, int] = (0, 0)  # device and inode of the file `fd` holds
        self.counted = False  # this process has counted in a file at the path
        with self.lock:
            self._acquire()
            self._release()

    def add(self, names: list[str], start: int, window: int, delta: int = 1) -> list[int]:
        """Add `delta` to each bucket in the window beginning at `start`; their new counts.
        A decrement of a window no longer held (its half was cleared since) changes nothing,
        and no count goes below zero."""
        digests = [hashlib.blake2b(name.encode(), digest_size=16).digest() for name in names]
        parity = (start // window) % 2
        with self.lock:
            fd, headers = self._acquire()
            try:
                at = parity * self.HEADER.size
                if self.HEADER.unpack_from(headers, at) != (start, window):
                    if delta < 0:
                        return [0 for _ in names]
                    # A new window (or a new window length: the setting changed) starts from zero.
                    os.pwrite(fd, bytes(self.half), self.slots_at + parity * self.half)
                    os.pwrite(fd, self.HEADER.pack(start, window), at)
                return [self._add(fd, self.slots_at + parity * self.half, digest, delta) for digest in digests]
            finally:
                self._release()

    def _add(self, fd: int, slots: int, digest: bytes, delta: int) -> int:
        first = int.from_bytes(digest[:8], "little") % self.SLOTS
        probed = 0
        while probed < self.SLOTS:
            index = (first + probed) % self.SLOTS
            count = min(self.PROBE_RUN, self.SLOTS - index, self.SLOTS - probed)  # a run never wraps
            chunk = self._read(fd, slots + index * self.SLOT.size, count * self.SLOT.size)
            for i in range(count):
                held, hits = self.SLOT.unpack_from(chunk, i * self.SLOT.size)
                if held == digest or held == EMPTY:
                    if held == EMPTY and delta < 0:
                        return 0
                    hits = max(0, hits + delta)
                    os.pwrite(fd, self.SLOT.pack(digest, hits), slots + (index + i) * self.SLOT.size)
                    return hits
            probed += count
        raise CountersFull(self.path)

    def _read(self, fd: int, offset: int, length: int) -> bytes:
        # Short only when the file was cut under us: what is gone reads as zeros (empty).
        return os.pread(fd, length, offset).ljust(length, b"\0")

    def _acquire(self) -> tuple[int, bytes]:
        """The descriptor of the file now at the path, locked, whole; and its window headers."""
        for _ in range(8):
            if self.fd is None:
                self.fd = self._open()
                held = os.fstat(self.fd)
                self.identity = (held.st_dev, held.st_ino)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                try:
                    current = os.stat(self.path)  # the file at the path: ours while its inode is
                except FileNotFoundError:
                    current = None
                if current is None or (current.st_dev, current.st_ino) != self.identity:
                    # Deleted or replaced: every process moves to the file at the path.
                    self._release()
                    os.close(self.fd)
                    self.fd = None
                    continue
                headers = self._whole(self.fd, current.st_size)
                self.counted = True
                return self.fd, headers
            except BaseException:
                self._release()
                raise
        raise CountersUnavailable(f"{self.path} keeps being replaced")

    def _release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _open(self) -> int:
        """The file at the path, made whole-sized before it is linked there: no process ever
        opens a half-made file."""
        try:
            return os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            pass
        made = f"{self.path}.{os.getpid()}.{threading.get_ident()}.new"
        fd = os.open(made, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, self.size)  # zeros: every slot empty, both halves at window 0
            os.link(made, self.path)
        except FileExistsError:  # another process linked its own first: count in that one
            os.close(fd)
            return os.open(self.path, os.O_RDWR)
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.unlink(made)
        if self.counted:
            logger.warning("rate-limit counter file %s was deleted; counting starts again from zero", self.path)
        return fd

    def _whole(self, fd: int, size: int) -> bytes:
        """The window headers of a whole file: this one's, or a new empty file's after a
        damaged one is logged and emptied."""
        if size == self.size:
            headers = self._read(fd, 0, self.slots_at)
            if all(plausible(*self.HEADER.unpack_from(headers, at)) for at in (0, self.HEADER.size)):
                return headers
            problem = "holds a window header this code never wrote"
        else:
            problem = f"is {size} bytes, not {self.size}"
        logger.warning("rate-limit counter file %s %s; counting starts again from zero", self.path, problem)
        os.ftruncate(fd, 0)
        os.ftruncate(fd, self.size)
        return bytes(self.slots_at)


def plausible(start: int, window: int) -> bool:
    """A header this code could have written: unused, or a window aligned to its length."""
    return (start, window) == (0, 0) or (window > 0 and start >= 0 and start % window == 0)


class BesideDatabase:
    """The file beside a SQLite database, and the database when the file cannot count (full,
    or its directory unusable): a hit is always counted somewhere every process reads."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.database = DatabaseCounters()
        self.file: SharedCounters | None = None
        self.opening = threading.Lock()
        self.failing = False

    def counters(self) -> SharedCounters:
        with self.opening:  # one descriptor per process, whichever thread counts first
            if self.file is None:
                self.file = SharedCounters(self.path)
            return self.file

    def add(self, names: list[str], start: int, window: int, hits: int = 1) -> list[int]:
        try:
            counts = self.counters().add(names, start, window, hits)
        except (OSError, CountersUnavailable) as exc:
            self._failed(exc)
            return self.database.add(names, start, window, hits)
        self.failing = False
        return counts

    def refund(self, names: list[str], start: int, window: int) -> None:
        # A hit the file could not take went to the database and is not given back: the limit
        # errs on the strict side, without a database write per refund.
        try:
            self.counters().add(names, start, window, delta=-1)
        except (OSError, CountersUnavailable) as exc:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if not self.failing:  # once per outage, not once per request
            logger.warning("rate limit counted in the database: the counter file %s cannot count (%s)", self.path, exc)
        self.failing = True
