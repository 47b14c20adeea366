"""A process forked from one that used the database (django-q2's workers, forked by a sentinel
that has run queries) must not share its parent's PostgreSQL connections (engine/forking.py)."""

from __future__ import annotations

import multiprocessing

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def _child(parent_pool_id: int, parent_connection_id: int, results) -> None:
    from django.db import connection as child_connection
    from django.db.backends.postgresql.base import DatabaseWrapper

    pools = DatabaseWrapper._connection_pools
    results.put({
        "pool_inherited": any(id(pool) == parent_pool_id for pool in pools.values()),
        "connection_inherited": id(child_connection.connection) == parent_connection_id,
    })
    # A query in the child runs on a session of its own.
    with child_connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        results.put(cursor.fetchone()[0])


def test_a_forked_child_opens_its_own_database_connections():
    if connection.vendor != "postgresql" or connection.pool is None:
        pytest.skip("only PostgreSQL connections are pooled")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        parent_backend = cursor.fetchone()[0]
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_child, args=(id(connection.pool), id(connection.connection), results))
    child.start()
    try:
        inherited = results.get(timeout=120)
        child_backend = results.get(timeout=120)
    finally:
        child.join(timeout=120)
    assert inherited == {"pool_inherited": False, "connection_inherited": False}
    assert child_backend != parent_backend
    with connection.cursor() as cursor:  # the parent's session is intact
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] == parent_backend


def _sqlite_child(parent_connection_id: int, results) -> None:
    from django.db import connection as child_connection

    results.put(id(child_connection.connection) == parent_connection_id)
    with child_connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        results.put(cursor.fetchone()[0])


def test_a_forked_child_does_not_keep_its_parents_sqlite_connection():
    """SQLite connections must not cross a fork (sqlite.org/howtocorrupt.html §2.6); `qcluster`
    keeps connections open (settings), so its forked pusher, monitor and workers drop theirs."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    connection.ensure_connection()
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_sqlite_child, args=(id(connection.connection), results))
    child.start()
    try:
        assert results.get(timeout=120) is False
        assert results.get(timeout=120) == 1
    finally:
        child.join(timeout=120)
