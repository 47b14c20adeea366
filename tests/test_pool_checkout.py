"""The check a pooled PostgreSQL connection gets as it leaves the pool (engine/postgresql):
no round trip while its socket is quiet, psycopg_pool's own check once the server has ended it."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from engine.postgresql import base

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's pool only")


def test_a_quiet_connection_is_usable_without_a_round_trip_and_an_ended_one_is_not(monkeypatch, db):
    checked = []
    real = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(lambda conn: checked.append(conn) or real(conn)))
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as idle, psycopg.connect(**params, autocommit=True) as admin:
        assert base.usable(idle) and checked == []  # quiet: no query sent
        pid = idle.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 60
        while not base.readable(idle.pgconn.socket):  # the server's FATAL message, then its FIN
            assert time.monotonic() < deadline, "the ended connection never became readable"
            time.sleep(0.01)
        assert not base.usable(idle) and checked == [idle]  # psycopg_pool's check decided
