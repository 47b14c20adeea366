"""Per-request time limit (`CONNECT_REQUEST_TIMEOUT_SECONDS`, default 10): a request's database
work is cut off there and the client gets `503 timeout` (`RequestTimeout`, apps/core/errors.py).

- PostgreSQL: `statement_timeout` on the server processes' connections only (set in the
  connection options by `apply_statement_timeout`, which the ASGI entry point calls, so
  migrations, seeds and task workers keep unlimited statements). The server cancels it.
- SQLite: a progress handler on every connection interrupts the statement past the deadline of
  the request running on its thread (`start_deadline`, from `RequestDeadlineMiddleware`).

What is bounded is the time spent in the database, where slow requests spend it (search, large
transcripts). Pure Python work in a view cannot be interrupted from outside its thread.

Relies on: the `connection_created` signal, `sqlite3.Connection.set_progress_handler` behind
`connection.connection`; PostgreSQL's `options` connection parameter (libpq
`-c statement_timeout=…`), read by psycopg's pool when it opens connections."""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db.backends.signals import connection_created

_request = threading.local()  # .deadline: a _clock() value, or None outside requests
_clock = time.monotonic  # module-level so that a test can stand the clock still

# How many SQLite virtual-machine instructions run between two deadline checks: about a
# millisecond of work, so the check costs nothing measurable and overshoots by little.
SQLITE_PROGRESS_STEPS = 10_000


def _past_deadline() -> int:
    deadline = getattr(_request, "deadline", None)
    return 1 if deadline is not None and _clock() > deadline else 0


def install_sqlite_deadline(sender, connection, **kwargs) -> None:  # noqa: ARG001 - signal
    if connection.vendor == "sqlite":
        connection.connection.set_progress_handler(_past_deadline, SQLITE_PROGRESS_STEPS)


connection_created.connect(install_sqlite_deadline, dispatch_uid="connect-sqlite-deadline")


def apply_statement_timeout() -> None:
    """PostgreSQL `statement_timeout` for this process's connections; call before the first
    connection is made (the connection pool reads the options when it opens)."""
    database = settings.DATABASES["default"]
    if not database["ENGINE"].endswith("postgresql"):
        return
    milliseconds = int(settings.CONNECT_REQUEST_TIMEOUT_SECONDS * 1000)
    options = database.setdefault("OPTIONS", {})
    existing = options.get("options", "")
    options["options"] = f"{existing} -c statement_timeout={milliseconds}".strip()


def start_deadline(seconds: float) -> None:
    """The request running on this thread may spend `seconds` from now in the database."""
    _request.deadline = _clock() + seconds


def end_deadline() -> None:
    _request.deadline = None
