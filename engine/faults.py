"""What a dependency failure looks like from the ORM and the Redis client, told apart by kind,
and the one transparent retry a read-only request gets when its database connection died.

- A statement the request deadline cut off (engine/deadlines.py): `503 timeout`.
- The database unreachable or a connection to it lost, or Redis unreachable: `503 unavailable`
  with `Retry-After` (`Unavailable`, apps/core/errors.py).
- A connection that died under a request is discarded; a read-only request (GET/HEAD, and /mcp,
  whose tools only read) runs once more on a fresh one, so the client never sees it. A write is
  never repeated: whether its transaction committed before the connection died is unknown.
  (One that died while idle in PostgreSQL's pool is replaced as it leaves: engine/postgresql.)

Relies on: Django's `DatabaseErrorWrapper` (driver exception as `__cause__`); psycopg's
`sqlstate`, `Connection.closed`, `psycopg_pool.PoolTimeout` and the pool discarding a closed
connection handed back (`putconn`); `connections.all(initialized_only=True)`,
`wrapper.connection`; SQLite's "interrupted" message for a statement its progress handler stopped."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connections
from django.db.utils import InterfaceError, OperationalError

logger = logging.getLogger("connect.faults")

QUERY_CANCELED = "57014"  # PostgreSQL: statement_timeout
# PostgreSQL states that mean "no usable connection": connection_exception (class 08),
# admin/crash shutdown and cannot_connect_now (57P01-57P03), insufficient resources (class 53,
# e.g. too_many_connections).
_UNAVAILABLE_STATES = ("08", "57P01", "57P02", "57P03", "53")
READ_ONLY_METHODS = frozenset({"GET", "HEAD"})

T = TypeVar("T")


def is_timeout(exc: BaseException) -> bool:
    """A statement the deadline cut off: SQLite's `interrupted`, PostgreSQL's query_canceled."""
    if not isinstance(exc, OperationalError):
        return False
    if getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED:
        return True
    return "interrupted" in str(exc)


def is_database_unavailable(exc: BaseException) -> bool:
    """The database could not be reached or the connection was lost (not a statement error)."""
    if not isinstance(exc, (OperationalError, InterfaceError)) or is_timeout(exc):
        return False
    if isinstance(exc, InterfaceError):
        return True  # "connection already closed" and the like: never a statement's fault
    cause = exc.__cause__
    try:
        import psycopg
    except ImportError:  # SQLite only: a locked or unopenable file stays a 500
        return False
    if not isinstance(cause, (psycopg.OperationalError, psycopg.InterfaceError)):
        return False
    state = getattr(cause, "sqlstate", None)
    return state is None or state.startswith(_UNAVAILABLE_STATES)


def is_redis_unavailable(exc: BaseException) -> bool:
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError
    except ImportError:
        return False
    return isinstance(exc, (RedisConnectionError, RedisTimeoutError))


def is_dependency_unavailable(exc: BaseException) -> bool:
    return is_database_unavailable(exc) or is_redis_unavailable(exc)


def discard_lost_connections() -> bool:
    """Closes this thread's database connections whose driver connection has died (the pool
    discards them), so the next query opens a fresh one. True when there was one."""
    lost = False
    for wrapper in connections.all(initialized_only=True):
        raw = wrapper.connection
        if raw is None or getattr(raw, "closed", False) is not True:
            continue
        lost = True
        try:
            wrapper.close()
        except Exception:  # noqa: BLE001 - closing a dead connection may complain; it is gone either way
            wrapper.connection = None
    return lost


def run_read_only(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, once more on a fresh connection when the first try failed because its
    database connection died. Only for work that writes nothing the client relies on."""
    try:
        return fn(*args)
    except (OperationalError, InterfaceError) as exc:
        if not (is_database_unavailable(exc) and discard_lost_connections()):
            raise
        logger.warning("database connection lost under a read-only request; retrying once: %s", exc)
    return fn(*args)
