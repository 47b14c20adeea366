"""Forked children and the database (registered by CoreConfig.ready for every process).

Relies on: Django's PostgreSQL backend keeping its psycopg pools in the class attribute
`DatabaseWrapper._connection_pools` (private, pinned in tests/test_engine_pins.py); the public
`connections.all(initialized_only=True)` and `wrapper.connection`; `os.register_at_fork`."""

from __future__ import annotations

import os

# Database pools a forked child inherited from its parent, kept referenced and never closed.
_inherited_pools: list = []


def forget_inherited_database_pools() -> None:
    """Runs in every child forked with os.fork (django-q2 forks its workers, pusher and monitor
    from a sentinel that has already queried the database, and forks workers again when one
    dies). psycopg's pool does not notice a fork: without this, parent and children take the
    same pooled connections, so two processes interleave messages on one PostgreSQL session and
    read each other's results (a lease UPDATE seen as 0 rows, an ApiKey lookup seen as empty).
    The child drops the inherited pools and connections so it opens its own. They are not
    closed — closing would end the parent's sessions — but kept referenced, so that no
    finalizer sends a terminate on the parent's sockets."""
    from django.db import connections

    try:
        from django.db.backends.postgresql.base import DatabaseWrapper
    except ImportError:  # psycopg not installed: no pools
        pass
    else:
        _inherited_pools.extend(DatabaseWrapper._connection_pools.values())
        DatabaseWrapper._connection_pools.clear()
    # SQLite connections must not be carried across a fork either (sqlite.org/howtocorrupt.html
    # §2.6); with persistent connections (qcluster) a child would otherwise keep its parent's.
    for wrapper in connections.all(initialized_only=True):
        if wrapper.connection is not None:
            _inherited_pools.append(wrapper.connection)
            wrapper.connection = None


def register() -> None:
    if not getattr(forget_inherited_database_pools, "registered", False):
        os.register_at_fork(after_in_child=forget_inherited_database_pools)
        forget_inherited_database_pools.registered = True
