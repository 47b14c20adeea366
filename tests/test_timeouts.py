"""Per-request time limit (engine/deadlines.py): a slow statement is cut off at
CONNECT_REQUEST_TIMEOUT_SECONDS and the client gets 503 timeout — on a real server, where
PostgreSQL's statement_timeout and SQLite's progress handler are set as in production."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from django.db import connection
from django.db.utils import OperationalError

from engine.faults import is_timeout
from tests.servers import ROOT, serve, without_request_id

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def bounded_server(django_db_setup, django_db_blocker, tmp_path_factory):
    with serve(tmp_path_factory.mktemp("timeouts"), env={"CONNECT_REQUEST_TIMEOUT_SECONDS": "1"}) as server:
        yield server


@pytest.mark.parametrize("path", ["/test/slow-query", "/test/slow-query-api"])
def test_a_slow_statement_ends_in_503_timeout(bounded_server, transactional_db, path):
    # 120 s of database work unbounded; the client gives up after 15 s, so only the server's
    # limit can produce this answer.
    with httpx.Client(base_url=bounded_server.url, timeout=15) as client:
        response = client.get(path, params={"seconds": 120})
        assert response.status_code == 503
        assert without_request_id(response.json()) == {"error": "timeout"}
        # The connection that was interrupted is usable again for the next request.
        assert client.get("/test/slow-query", params={"seconds": 0.01}).json() == {"slept": True}
        assert client.get("/readyz").status_code == 200


def test_fast_statements_are_untouched(bounded_server, transactional_db):
    # A statement of no length: SQLite's progress handler is not even consulted (it runs every
    # SQLITE_PROGRESS_STEPS instructions) and PostgreSQL's timer would need a whole second's
    # stall of the server, so a busy machine cannot turn it into a 503.
    with bounded_server.client() as client:
        assert client.get("/test/slow-query-api", params={"seconds": 0}).json() == {"slept": True}


@pytest.mark.skipif(connection.vendor != "sqlite", reason="PostgreSQL's server enforces its statement_timeout")
def test_a_long_statement_before_its_deadline_runs_to_the_end_and_one_past_it_is_cut(db, monkeypatch):
    """The SQLite deadline with the clock held still, so the machine's load cannot decide: a
    statement of ~0.3 s of work is untouched while the clock stays before the deadline, and
    interrupted once it is past."""
    from engine import deadlines
    from tests.urls import slow_query

    now = [100.0]
    monkeypatch.setattr(deadlines, "_clock", lambda: now[0])
    connection.ensure_connection()
    deadlines._request.deadline = 101.0
    try:
        slow_query(0.3)  # not interrupted, however long it takes on this machine
        now[0] = 102.0
        with pytest.raises(OperationalError) as raised:
            slow_query(0.3)
        assert is_timeout(raised.value)
    finally:
        deadlines._request.deadline = None


def test_commands_keep_unbounded_statements(transactional_db):
    """statement_timeout is set by the ASGI entry point only: a management command (migrate,
    seed_demo, the task workers) has no deadline."""
    code = (
        "from django.db import connection; connection.ensure_connection(); "
        "print(connection.settings_dict['OPTIONS'].get('options', ''))"
    )
    from tests.servers import database_url_for_test_db

    env = {"DATABASE_URL": database_url_for_test_db(), "CONNECT_DEVELOPMENT": "1", "DJANGO_SETTINGS_MODULE": "tests.settings"}
    import os

    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", code],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "statement_timeout" not in result.stdout


def test_is_timeout_recognises_only_interrupted_statements():
    assert is_timeout(OperationalError("interrupted"))
    assert not is_timeout(OperationalError("database is locked"))
    assert not is_timeout(ValueError("interrupted"))
    if connection.vendor == "postgresql":
        import psycopg

        error = OperationalError("canceling statement due to statement timeout")
        error.__cause__ = psycopg.errors.QueryCanceled()
        assert is_timeout(error)
