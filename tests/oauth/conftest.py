from __future__ import annotations

import pytest

from tests.oauth.cimd_server import document_server
from tests.oauth.flow import start


@pytest.fixture
def flow(live_server_daphne, transactional_db, alice):
    """A registered public client and Alice (member of acme) logged in, on the live server."""
    f = start(live_server_daphne, "alice@acme.test", "alice-password-1")
    yield f
    f.http.close()
    f.browser.http.close()


@pytest.fixture
def server(tmp_path):
    """A loopback HTTPS server of Client ID Metadata Documents (tests/oauth/cimd_server.py)."""
    with document_server(tmp_path) as s:
        yield s


@pytest.fixture
def testing(settings, server):
    """Loopback allowed and the test CA trusted, as only a test's settings can arrange."""
    settings.CONNECT_CIMD_TESTING_CA_FILE = str(server.ca_file)
    return server
