"""Listen streams are counted in the stream's metrics: the open-streams gauge, the disconnects
by reason, the frames handed out — summed over every process of `serve` (tests/obs)."""

from __future__ import annotations

import pytest

from apps.recordings import services
from tests import factories
from tests.mcp.streams import StreamReader, listen_body
from tests.obs.conftest import obs_server, scrape, total  # noqa: F401 - a fixture
from tests.servers import collected_static, wait_until  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_listen_stream_is_gauged_and_its_end_counted(obs_server, alice, alice_key):  # noqa: F811
    meeting = factories.session(alice.workspace)
    before = scrape(obs_server.url)
    closed_before = total(before, "connect_sse_disconnects_total", reason="client_gone")
    fanned_before = total(before, "connect_sse_events_fanned_out_total")
    reader = StreamReader(obs_server.url, alice_key, listen_body(1, uris=[f"connect://sessions/{meeting.id}"]))
    try:
        reader.wait_for("notifications/subscriptions/acknowledged", 1)
        assert total(scrape(obs_server.url), "connect_sse_open_streams") == 1
        services.change_session_status(session=meeting, status="processing")
        reader.wait_for("notifications/resources/updated", 1)
        assert total(scrape(obs_server.url), "connect_sse_events_fanned_out_total") == fanned_before + 1
    finally:
        reader.close()
    samples = wait_until(
        lambda: (s := scrape(obs_server.url)) and total(s, "connect_sse_open_streams") == 0 and s,
        what="the stream to close", timeout=60,
    )  # fmt: skip
    assert total(samples, "connect_sse_disconnects_total", reason="client_gone") == closed_before + 1
