"""How a committed event reaches every server process (`announce_committed`, run after commit by
`services.record_events`, once per transaction). Two carriers, one per deployment (docs/operations.md):

- production (`REDIS_URL` set): the committing process publishes one message per transaction,
  its events' ids, on one Redis pub/sub channel, to which every server process holds exactly
  one subscription (apps/stream/carrier.py); it wakes each process's follower, which reads the
  events from the log once per process, whatever the number of streams.
- embedded default (no Redis): every server process follows the outbox table itself. A commit
  wakes its own process's follower at once and every other process on the host with one empty
  datagram each, to the Unix datagram socket each server process binds in
  `<database file>.wake/` (`commit_listener`). A lost datagram only costs latency: the
  follower's poll still finds the event."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import orjson
from django.conf import settings

from apps.core.redis_clients import redis_client
from apps.events.models import Event

logger = logging.getLogger("connect.events")

# Set by the running hub of this process (if any), called from any thread after a commit.
local_wakeups: list = []


def redis_channel() -> str:
    # One channel per database, so two deployments (or test runs) sharing a Redis never mix.
    return f"connect:events:{settings.DATABASES['default']['NAME']}"


def wire_message(events: list[Event]) -> bytes:
    """What travels on Redis for one transaction: its events' ids in their order (`n`), and the
    first one alone (`i`), the form a process of the previous release reads (one event a
    message): awaiting that one wakes its follower, which reads them all from the log."""
    return orjson.dumps({"i": events[0].id, "n": [event.id for event in events]})


def announce_committed(events: list[Event]) -> None:
    """Announces one transaction's events: one Redis message for them all (a batch of appended
    segments is hundreds of events), or one wake-up of every process (a woken follower reads
    everything new, however many)."""
    if settings.REDIS_URL:
        try:
            redis_client().publish(redis_channel(), wire_message(events))
        except Exception:  # noqa: BLE001 - the events are committed; live delivery is best effort
            logger.exception("could not publish %s… to Redis; open streams miss them (resume still has them)",
                             events[0].id)  # fmt: skip
    else:
        _wake_other_processes()
    for wake in list(local_wakeups):
        wake()


# --- the embedded wake-up: one datagram per server process, no broker ---------------------------
SUN_PATH_MAX = 100  # AF_UNIX paths are at most 107 bytes on Linux
_sender: socket.socket | None = None


def wake_dir() -> Path | None:
    """Where the server processes of an embedded deployment listen for commits: beside its
    SQLite file (one host by nature). None with Redis or without a database file."""
    from django.db import connections

    db = connections["default"].settings_dict
    name = str(db.get("NAME") or "")
    if settings.REDIS_URL or not db["ENGINE"].endswith("sqlite3") or not name or name == ":memory:" or name.startswith("file:"):
        return None
    directory = Path(f"{name}.wake")
    return directory if len(str(directory)) + 12 <= SUN_PATH_MAX else None


def _wake_other_processes() -> None:
    global _sender
    directory = wake_dir()
    if directory is None:
        return
    try:
        names = os.listdir(directory)
    except OSError:
        return  # no server process listens
    mine = str(os.getpid())
    if _sender is None:
        _sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        _sender.setblocking(False)
    for name in names:
        if name == mine:
            continue  # woken through local_wakeups
        path = directory / name
        try:
            _sender.sendto(b"", str(path))
        except ConnectionRefusedError:
            path.unlink(missing_ok=True)  # bound by a process that is gone
        except OSError:
            pass  # a full queue (that process is awake anyway), a race with its exit


def commit_listener(on_commit) -> socket.socket | None:
    """This process's datagram socket in `wake_dir()` (None when there is none): the caller
    reads it on its loop and calls `on_commit()`. Removed when the process exits normally; a
    killed process's socket is removed by the first sender it refuses."""
    directory = wake_dir()
    if directory is None:
        return None
    try:
        directory.mkdir(exist_ok=True)
        path = directory / str(os.getpid())
        path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(path))
        sock.setblocking(False)
    except OSError:
        logger.warning("no commit wake-up socket in %s; other processes' commits are seen by polling", directory)
        return None
    import atexit

    atexit.register(path.unlink, missing_ok=True)
    return sock
