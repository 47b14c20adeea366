"""A stream open whose database cannot be reached at all answers the contract's JSON,
`503 {"error": "unavailable"}` with `Retry-After`, never a 500 or daphne's HTML page."""

from __future__ import annotations

import httpx
import pytest

from tests.events.live import STREAM, start_server
from tests.servers import free_port, without_request_id

pytestmark = pytest.mark.e2e


def test_an_unreachable_database_answers_503_unavailable_as_json(tmp_path):
    unreachable = f"postgres://postgres@127.0.0.1:{free_port()}/connect"
    server = start_server(tmp_path, DATABASE_URL=unreachable)
    try:
        # The pool gives up after its 10 s timeout; the client waits longer than that.
        response = httpx.get(server.url + STREAM, headers={"Authorization": "Bearer svc_anything"}, timeout=60)
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/json"
        assert without_request_id(response.json()) == {"error": "unavailable"}
        assert int(response.headers["retry-after"]) >= 1
    finally:
        server.stop()
