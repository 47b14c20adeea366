"""The hub's database jobs on PostgreSQL: a connection the server closed under a job is replaced
and a job marked safe to repeat runs once more; one not so marked fails (its caller answers
503); a pooled connection the server closed while idle is replaced before the job sees it."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError, connection

from apps.stream.threads import db_job
from apps.events.models import StreamSlot

pytestmark = [
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="PostgreSQL's connections and pool",
    ),
    pytest.mark.django_db(transaction=True),
]


def killed_on_first_run():
    """A job whose first run meets a connection the server terminates under it."""
    runs = []

    def job():
        connection.ensure_connection()
        runs.append(connection.connection.info.backend_pid)
        if len(runs) == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return StreamSlot.objects.count()

    return job, runs


def test_a_job_safe_to_repeat_runs_again_on_a_fresh_connection():
    job, runs = killed_on_first_run()
    assert db_job(job, True) == 0
    assert len(runs) == 2 and runs[0] != runs[1]


def test_a_job_not_marked_safe_is_not_repeated():
    job, runs = killed_on_first_run()
    with pytest.raises(OperationalError):
        db_job(job, False)
    assert len(runs) == 1
    assert db_job(StreamSlot.objects.count, False) == 0  # the next job gets a live connection


@contextmanager
def other_connection():
    db = connection.settings_dict
    with psycopg.connect(
        dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"] or None, host=db["HOST"], port=db["PORT"],
        autocommit=True,
    ) as raw:
        yield raw


def own_database_ports() -> list[int]:
    """Local ports of this process's TCP connections to the database server: its pooled
    connections (live servers of other tests share the database; theirs are not ours to end)."""
    server_port = int(connection.settings_dict["PORT"] or 5432)
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == server_port and fields[9] in inodes:
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_idle_connections_the_server_closed_are_replaced_before_the_job():
    connection.ensure_connection()
    connection.close()  # back to the pool: every connection of this process now sits idle there
    with other_connection() as raw:
        # The timeout makes it wait until each backend has exited: closed by the server, as the
        # check before a job sees it (a readable socket, engine/postgresql/base.py).
        # Without it, under load, the job could start while the backend was still on its way out.
        ended = raw.execute(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
            "WHERE datname = current_database() AND client_port = ANY(%s) AND pid <> pg_backend_pid()) AS ended",
            [own_database_ports()],
        ).fetchone()[0]
    assert ended >= 1

    # Not marked safe to repeat, so only the check before the job can keep these from failing.
    for _ in range(3):
        assert db_job(StreamSlot.objects.count, False) == 0
