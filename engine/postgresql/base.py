"""Django's PostgreSQL backend (`ENGINE = "engine.postgresql"`, set by connect/settings.py
whenever DATABASE_URL is PostgreSQL), with each pooled connection tried as it leaves psycopg's
pool, so one the server or a proxy closed while it sat idle (a restart, `pg_terminate_backend`,
an idle timeout) is never handed to a request.

The check costs no round trip while the connection is quiet: an idle connection has nothing to
read, and one the server ended (a restart, `pg_terminate_backend`, an idle timeout: the server
sends its FATAL message and closes) or a proxy closed has its socket readable (the message, or
the end of the stream). Only then is psycopg_pool's own check run (`ConnectionPool.check_connection`:
an empty query, one round trip), and it decides. A peer that vanished without closing (a host
gone, a network cut) leaves the socket quiet and is caught by the request's own query, as an
empty query would have been caught: by the read-only retry or its error. Before, every request
paid the empty query, a third of /mcp's round trips to the database. It is not the pool's `check=` hook (Django's `CONN_HEALTH_CHECKS`): after a failed check
that hook sleeps 1, 2, 4… s before trying the next connection, so a pool whose idle connections
all died at once made its first request wait past the pool timeout and fail. Here one failed
check makes the pool test every idle connection at once (`ConnectionPool.check()`: the dead are
discarded and replaced) before the request takes a fresh one. A connection that dies while a
request holds it is engine/faults.py's (one retry for read-only requests).

Relies on: Django's backend loading `<ENGINE>.base.DatabaseWrapper`, and
`DatabaseWrapper.get_new_connection(conn_params)` taking the connection from `self.pool`
(`pool.getconn()`) when the pool is configured; psycopg_pool's `check_connection`, `check()` and
`putconn` discarding a closed connection (pinned in tests/test_engine_pins.py).
"""

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
