"""Django's PostgreSQL backend (`ENGINE = "engine.postgresql"`, set by connect/settings.py
whenever DATABASE_URL is PostgreSQL), with each pooled connection tried as it leaves psycopg's
pool, so one the server or a proxy closed while it sat idle is never handed to a request.

The check costs no round trip while the connection is quiet: an idle connection has nothing to
read, and one the server ended (its FATAL message) or a proxy closed has its socket readable.
Only then is psycopg_pool's own check run (`check_connection`, an empty query), and it decides;
one failed check makes the pool test every idle connection at once (`ConnectionPool.check()`)
before the request takes a fresh one. Not the pool's `check=` hook, which sleeps between failed
checks, so a pool whose idle connections all died made its first request fail. A peer gone
silently, or a connection dying under a request, is engine/faults.py's (docs/decisions/runtime.md).

Relies on (pinned in tests/test_engine_pins.py): Django's backend loading
`<ENGINE>.base.DatabaseWrapper`, `get_new_connection` taking the connection from `self.pool`;
psycopg_pool's `check_connection`, `check()` and `putconn` discarding a closed connection."""

from __future__ import annotations

import logging
import select

from django.db.backends.postgresql.base import DatabaseWrapper as DjangoDatabaseWrapper

logger = logging.getLogger("connect.faults")


class DatabaseWrapper(DjangoDatabaseWrapper):
    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        pool = self.pool
        if pool is None or usable(connection):
            return connection
        logger.warning("a pooled database connection had died; checking the pool's idle connections")
        pool.putconn(connection)  # closed, so the pool discards it and opens a replacement
        pool.check()
        return super().get_new_connection(conn_params)


def usable(connection) -> bool:
    from psycopg import Error
    from psycopg_pool import ConnectionPool

    if connection.closed:
        return False
    if not readable(connection.pgconn.socket):
        return True  # quiet: nothing from the server since it was idle, no FIN
    try:
        ConnectionPool.check_connection(connection)
    except Error:
        return False
    return True


def readable(fd: int) -> bool:
    """Whether the socket has something to read (or its end), without waiting."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))
