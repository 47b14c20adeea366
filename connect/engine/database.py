"""What a database failure looks like from the ORM, told apart by kind: a statement the
request deadline cut off (connect/engine/deadlines.py).

Relies on: Django wrapping driver errors in `django.db.utils.OperationalError` with the
driver's exception as `__cause__` (public behaviour of `DatabaseErrorWrapper`); psycopg's
`sqlstate` attribute; SQLite's "interrupted" message for a statement its progress handler
stopped.
"""

from __future__ import annotations

from django.db.utils import OperationalError

QUERY_CANCELED = "57014"  # PostgreSQL: statement_timeout


def is_timeout(exc: BaseException) -> bool:
    """A statement the deadline cut off: SQLite's `interrupted`, PostgreSQL's query_canceled."""
    if not isinstance(exc, OperationalError):
        return False
    if getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED:
        return True
    return "interrupted" in str(exc)
