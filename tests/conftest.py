"""Shared fixtures: named workspaces and members (an outsider in every isolation test), an
HTTP client for the Django test server, and a live daphne for end-to-end tests."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.db import DatabaseError
from django.db.backends.signals import connection_created
from django.test import Client

from tests import factories
from tests.servers import start


def _let_live_servers_lose_deadlocks(sender, connection, **kwargs) -> None:
    """PostgreSQL: between live tests, the test process TRUNCATEs every table (transactional_db)
    while the live servers' background work (stream slot leases, credential checks, the task
    cluster, the sweeper) still reads; the two can take table locks in opposite orders, and
    PostgreSQL then aborts whichever waiter checks first, after `deadlock_timeout`. Checking
    later in this process makes the server's read the one aborted (it logs and retries), not the
    test's flush. Only this process: the servers keep the default."""
    if connection.vendor == "postgresql":
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET deadlock_timeout = '10s'")
        except DatabaseError:  # not a superuser: keep the default
            pass


connection_created.connect(_let_live_servers_lose_deadlocks)


@dataclass
class Api:
    """Django's test client speaking Bearer: `api.get("/api/v1/sessions", key)`."""

    client: Client

    def get(self, path: str, key: str | None = None, **params):
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        return self.client.get(path, params, headers=headers)


@pytest.fixture
def api() -> Api:
    return Api(Client())


@pytest.fixture
def acme(db):
    return factories.workspace("acme")


@pytest.fixture
def globex(db):
    return factories.workspace("globex")


@pytest.fixture
def alice(acme):
    return factories.member(acme, "alice@acme.test", password="alice-password-1")


@pytest.fixture
def bob(globex):
    return factories.member(globex, "bob@globex.test", password="bob-password-1")


@pytest.fixture
def alice_key(alice) -> str:
    return factories.api_key(alice, factories.ALL_SCOPES)


@pytest.fixture
def bob_key(bob) -> str:
    return factories.api_key(bob, factories.ALL_SCOPES)


@pytest.fixture(scope="session")
def live_server_daphne(django_db_setup, django_db_blocker, tmp_path_factory):
    """`manage.py serve` in a subprocess on a free port, on this worker's test database.

    Tests that use it must use `transactional_db`, so the rows they write are committed and
    visible to the server process."""
    server = start(tmp_path_factory.mktemp("live-server"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def webhook_server(django_db_setup, django_db_blocker, tmp_path_factory):
    """`manage.py serve` with the task cluster (tests/webhooks/conftest.py LIVE_ENV), on this
    worker's test database: one per test process. Defined here, never imported into a module: a
    session fixture imported into a module is another fixture, so a second server with the same
    queue and database would run beside the first until the session ends and take its
    deliveries (a test that kills the worker holding an attempt then found another server's)."""
    from tests.webhooks.conftest import LIVE_ENV

    server = start(tmp_path_factory.mktemp("webhook-server"), tasks=True, env=LIVE_ENV)
    yield server
    server.stop()
