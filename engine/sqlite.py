"""SQLite's write-ahead log, switched on once per process and database file.

`journal_mode` is kept in the database file, so one `PRAGMA journal_mode=WAL` per file would
do; run on every new connection (it was in the settings' `init_command`), it waits for the
file's lock whenever another process is writing, and processes that connect per task
(django-q2's pusher, monitor and workers) spent a large share of their time there
(docs/decisions/runtime.md "Runtime").

Relies on: the `connection_created` signal and the raw `sqlite3.Connection` behind
`connection.connection` (public Django API)."""

from __future__ import annotations

from django.db.backends.signals import connection_created

_done: set[str] = set()


def use_wal(sender, connection, **kwargs) -> None:  # noqa: ARG001 - signal
    if connection.vendor != "sqlite":
        return
    name = str(connection.settings_dict["NAME"])
    if name not in _done:
        connection.connection.execute("PRAGMA journal_mode=WAL")
        _done.add(name)


connection_created.connect(use_wal, dispatch_uid="connect-sqlite-wal")
