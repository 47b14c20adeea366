"""Statements prepared once per pooled PostgreSQL connection (`PREPARE` / `EXECUTE`), for the few
small statements every request runs, whose planning costs more than their execution: the API-key
lookup (apps/access/credentials.py) and PostgreSQL search's batches, built at run time in a
bounded number of shapes, each named by a digest of its text (`name_for`). psycopg's own
automatic preparation is off under Django (it sets `prepare_threshold` to None), so the statement
is prepared in SQL, by name, through the same client-side cursor as every other query, and runs
with its generic plan (`PLAN_CACHE_MODE`). Why, and what it saves: docs/decisions/runtime.md
"Hot paths at the protocol's floor" and docs/decisions/search.md "PostgreSQL search: other words".

A connection's prepared names are remembered per driver connection; `run` says how a connection
that lost them, or a statement a migration changed, is prepared again. Inside a transaction,
where a failed statement would abort it, the statement runs unprepared.

Relies on: `connection.connection` (the psycopg connection, weakly referenceable) and Django
wrapping the driver's error with it as `__cause__` (its `sqlstate`)."""

from __future__ import annotations

import functools
import hashlib
import weakref
from typing import Any

from django.db import DatabaseError, connection

INVALID_STATEMENT_NAME = "26000"
DUPLICATE_PREPARED_STATEMENT = "42P05"
# "cached plan must not change result type": a migration changed a column the statement
# returns since it was prepared on this connection.
FEATURE_NOT_SUPPORTED = "0A000"

# Every statement prepared here runs with the plan PostgreSQL made once for it (a generic plan):
# by default it plans each run again for its parameters (a custom plan) whenever the generic
# plan's estimated cost is higher than the custom plans' so far, as it is for the search's
# batches (a LIMIT or a word it cannot see), so preparing them saved nothing. Set per session,
# on the connection's first prepared statement: Django prepares nothing itself, and the only
# PL/pgSQL (the search index's triggers) runs statements without parameters, always generic.
PLAN_CACHE_MODE = "force_generic_plan"

_prepared: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def numbered(sql: str) -> str:
    """`%s` placeholders as PostgreSQL's `$1`, `$2`, … (the statements have no other `%`)."""
    parts = sql.split("%s")
    return "".join(part + (f"${i}" if i < len(parts) else "") for i, part in enumerate(parts, start=1))


def fetchone(name: str, sql: str, params: list[Any]) -> tuple | None:
    """`sql` (with `%s` placeholders) run with `params`, its first row; as the prepared statement
    `name` on PostgreSQL outside a transaction, else as it is."""
    with connection.cursor() as cursor:
        run(cursor, name, sql, params)
        return cursor.fetchone()


def run(cursor, name: str | None, sql: str, params: list[Any]) -> None:
    """`sql` (with `%s` placeholders) run with `params` on `cursor` (a cursor of Django's default
    connection), its rows left on the cursor to fetch: as the prepared statement `name` (None:
    a name made from the text, `name_for`) on PostgreSQL outside a transaction, else as it is.

    A connection that lost its prepared names (`DEALLOCATE ALL`, `DISCARD ALL`, a pooler that hands
    over another server connection) answers `26000 invalid_sql_statement_name`: the process forgets
    all it had prepared there, sets the plan mode again and prepares the statement again (a name
    the connection still has, `42P05`, is kept: the same name is always the same text). One whose
    statement returns a column a migration changed since answers `0A000`: that statement is
    deallocated and prepared again. Either way it runs once more. A pooler that hands over a
    server connection which has the statements but not the plan mode gives custom plans: slower,
    the same rows."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        cursor.execute(sql, params)
        return
    name = name or name_for(sql)
    names = _prepared.setdefault(connection.connection, set())
    execute = f"EXECUTE {name}({', '.join(['%s'] * len(params))})" if params else f"EXECUTE {name}"
    for attempt in (1, 2):
        if name not in names:
            if not names:  # the connection's first statement (or the first since it lost them)
                cursor.execute(f"SET plan_cache_mode = {PLAN_CACHE_MODE}")
            _prepare(cursor, name, sql)
            names.add(name)
        try:
            cursor.execute(execute, params)
        except DatabaseError as error:
            state = getattr(error.__cause__, "sqlstate", None)
            if attempt == 2 or state not in (INVALID_STATEMENT_NAME, FEATURE_NOT_SUPPORTED):
                raise
            if state == FEATURE_NOT_SUPPORTED:
                names.discard(name)  # its plan no longer fits the tables
                cursor.execute(f"DEALLOCATE {name}")
            else:
                names.clear()  # the connection lost them all, and its settings (DISCARD ALL)
            continue
        return


@functools.lru_cache(maxsize=1024)
def name_for(sql: str) -> str:
    """A statement name for `sql`: the same text gets the same name in every process (a digest
    of it), so one shape of a statement built at run time is prepared once per connection."""
    return "connect_s_" + hashlib.blake2b(sql.encode(), digest_size=10).hexdigest()


def _prepare(cursor, name: str, sql: str) -> None:
    try:
        cursor.execute(f"PREPARE {name} AS {numbered(sql)}")
    except DatabaseError as error:
        if getattr(error.__cause__, "sqlstate", None) != DUPLICATE_PREPARED_STATEMENT:
            raise
