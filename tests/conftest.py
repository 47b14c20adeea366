"""Shared fixtures: named workspaces and members (an outsider in every isolation test), an
HTTP client for the Django test server, and a live daphne for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.test import Client

from tests import factories

ROOT = Path(__file__).resolve().parent.parent


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url_for_test_db() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10, **kwargs)


@pytest.fixture(scope="session")
def live_server_daphne(django_db_setup, django_db_blocker, tmp_path_factory):
    """`manage.py serve` in a subprocess on a free port, on this worker's test database.

    Tests that use it must use `transactional_db`, so the rows they write are committed and
    visible to the server process."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_test_db(),
        "CONNECT_BASE_URL": url,
        "CONNECT_DEVELOPMENT": "1",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONUNBUFFERED": "1",
    }
    log = open(tmp_path_factory.mktemp("live-server") / "server.log", "w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/.well-known/oauth-protected-resource", timeout=1)
            break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"live server did not start; see {log.name}") from None
            time.sleep(0.2)
    yield LiveServer(url=url, process=process)
    process.terminate()
    process.wait(timeout=15)
    log.close()
