"""Fixtures of the client's tests: the installed client (tests/client/installed.py), a live
`serve` that a test may restart on the same port, and a workspace with activity."""

from __future__ import annotations

import pytest

from tests import factories
from tests.client.installed import import_installed
from tests.events.live import start_server

import_installed()  # before any test module does `import connect_client`


class Live:
    """One `serve` a test may restart on the same port (clients reconnect to the same URL)."""

    def __init__(self, log_dir, **env: str) -> None:
        self.log_dir, self.env = log_dir, env
        self.server = start_server(log_dir, **env)

    @property
    def url(self) -> str:
        return self.server.url

    def restart(self, while_down=lambda: None, **env: str) -> None:
        port = self.server.port
        self.server.stop()
        while_down()
        self.server = start_server(self.log_dir, port=port, **{**self.env, **env})

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory):
    server = Live(tmp_path_factory.mktemp("client-live"))
    yield server
    server.stop()


@pytest.fixture
def key(alice) -> str:
    return factories.api_key(alice, factories.ALL_SCOPES)


@pytest.fixture
def client(live, key):
    import connect_client

    with connect_client.Connect(live.url, api_key=key, timeout=30) as c:
        yield c
