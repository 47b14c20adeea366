from __future__ import annotations

import pytest

from tests.oauth.flow import start


@pytest.fixture
def flow(live_server_daphne, transactional_db, alice):
    """A registered public client and Alice (member of acme) logged in, on the live server."""
    f = start(live_server_daphne, "alice@acme.test", "alice-password-1")
    yield f
    f.http.close()
    f.browser.http.close()
