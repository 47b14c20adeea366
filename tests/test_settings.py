"""Configuration from the environment (README.md, Configuration), checked in real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.db import connection

from apps.recordings.models import Session
from tests import factories
from tests.servers import ROOT, database_url_for_test_db


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "CONNECT_DEVELOPMENT"}}
    clean["DJANGO_SETTINGS_MODULE"] = "connect.settings"
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120
    )


def test_production_refuses_the_development_secret():
    """A deployment never ran `make run`, so it has no var/development mark; this checkout may
    have one (tests/test_docs_run.py runs `make run` here), and CONNECT_DEVELOPMENT=0 stands for
    its absence: the variable, when set, decides."""
    result = run_manage("check", env={"CONNECT_DEVELOPMENT": "0"})
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr and "make run" in result.stderr


def test_production_starts_with_its_own_secret():
    result = run_manage("check", env={"SECRET_KEY": "a-real-secret-" + "x" * 40})
    assert result.returncode == 0, result.stderr


def test_debug_allows_the_development_secret():
    assert run_manage("check", env={"DEBUG": "1"}).returncode == 0


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite pragmas")
def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(db):
    with connection.cursor() as cursor:
        assert cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000


WRITER = """
from apps.recordings import services
from apps.recordings.models import Session
session = Session.objects.get(label="shared")
for i in range({count}):
    # Read-then-write transactions: the last version is read, the next one written.
    services.publish_board(session=session, board_id="summary", payload={{"writer": {n}, "i": i}},
                           source_revision_kind="committed")
    services.append_committed_segments(session=session, segments=[services.SegmentInput(0, 1, "w{n}")])
print("done")
"""


def test_concurrent_writers_neither_fail_nor_collide(transactional_db):
    """Server, workers and commands write at once: every write lands, none fails with
    `database is locked`, and none takes a version or sequence another writer took."""
    from apps.recordings.models import BoardContent, Segment

    session = factories.session(factories.workspace("acme"), label="shared")
    env = {"DATABASE_URL": database_url_for_test_db(), "CONNECT_DEVELOPMENT": "1"}
    writers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c", WRITER.format(count=15, n=n)],
            cwd=ROOT,
            env={**os.environ, **env, "DJANGO_SETTINGS_MODULE": "connect.settings"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    results = [w.communicate(timeout=180) for w in writers]
    for writer, (out, err) in zip(writers, results):
        assert writer.returncode == 0, err[-2000:]
    versions = sorted(BoardContent.objects.filter(session=session).values_list("version", flat=True))
    assert versions == list(range(1, 61))
    assert BoardContent.objects.filter(session=session, is_current=True).count() == 1
    sequences = sorted(Segment.objects.filter(transcript__session=session).values_list("sequence", flat=True))
    assert sequences == list(range(60))


def test_limits_and_timeout_come_from_the_environment():
    code = (
        "from django.conf import settings as s; "
        "print(s.CONNECT_RATE_LIMIT_PER_CREDENTIAL, s.CONNECT_RATE_LIMIT_PER_WORKSPACE, "
        "s.CONNECT_RATE_LIMIT_WINDOW_SECONDS, s.CONNECT_REQUEST_TIMEOUT_SECONDS)"
    )
    env = {"DEBUG": "1", "CONNECT_RATE_LIMIT_PER_CREDENTIAL": "5", "CONNECT_RATE_LIMIT_PER_WORKSPACE": "0",
           "CONNECT_RATE_LIMIT_WINDOW_SECONDS": "10", "CONNECT_REQUEST_TIMEOUT_SECONDS": "2.5"}
    result = run_manage("shell", "-v", "0", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["5", "0", "10", "2.5"]
    defaults = run_manage("shell", "-v", "0", "-c", code, env={"DEBUG": "1"}).stdout.split()
    assert defaults == ["60000", "120000", "60", "10.0"]
