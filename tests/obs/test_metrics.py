"""Issue 22 (3): `/metrics` sums every process of `serve` (prometheus-client multiprocess mode),
survives a restarted child without double counting, and is refused without its token."""

from __future__ import annotations

import os
import signal

import httpx
import pytest

from tests import factories
from tests.obs.conftest import METRICS_TOKEN, json_lines, scrape, total
from tests.servers import alive, cmdline_of, descendants, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

ROUTE = "api/v1/sessions"


def daphne_pids(server) -> list[int]:
    return sorted(pid for pid in descendants(server.process.pid) if b"daphne" in cmdline_of(pid) and alive(pid))


def requests_on_fresh_connections(server, count: int, key: str) -> set[int]:
    """`count` GETs, each on a new connection (so SO_REUSEPORT spreads them over the
    processes); the pids that answered them, from the access lines."""
    ids = set()
    for _ in range(count):
        response = httpx.get(f"{server.url}/api/v1/sessions", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert response.status_code == 200
        ids.add(response.headers["X-Request-Id"])
    lines = wait_until(
        lambda: (found := [line for line in json_lines(server) if line.get("request_id") in ids
                           and line["logger"] == "connect.access"]) and len(found) == count and found,
        what="the access lines", timeout=30,
    )  # fmt: skip
    return {line["process"] for line in lines}


def test_metrics_is_404_when_no_token_is_configured(live_server_daphne):
    response = httpx.get(f"{live_server_daphne.url}/metrics", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.parametrize(
    "authorization", [None, "Bearer", "Bearer wrong", f"Basic {METRICS_TOKEN}", f"Bearer {METRICS_TOKEN}x",
                      f"Bearer {METRICS_TOKEN[:-1]}"],
)  # fmt: skip
def test_metrics_refuses_a_scrape_without_the_token(obs_server, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.get(f"{obs_server.url}/metrics", headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert "connect_http_requests" not in response.text


def test_metrics_is_never_rate_limited(obs_server):
    # Far more scrapes than anything would allow if it were counted: no credential, no bucket.
    for _ in range(30):
        response = httpx.get(f"{obs_server.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert response.status_code == 200
        assert "RateLimit-Limit" not in response.headers


def test_one_scrape_sums_both_processes_and_a_restarted_child_is_counted_once(obs_server, alice_key):
    before = total(scrape(obs_server.url), "connect_http_requests_total", route=ROUTE, status="200")
    pids = set()
    for _ in range(5):  # the kernel's hash may send a few connections to one process
        pids |= requests_on_fresh_connections(obs_server, 10, alice_key)
        if len(pids) == 2:
            break
    made = 10 * (_ + 1)
    assert len(pids) == 2, "both daphne processes answered"
    after = scrape(obs_server.url)
    assert total(after, "connect_http_requests_total", route=ROUTE, status="200") == before + made
    assert total(after, "connect_http_request_duration_seconds_count", route=ROUTE) >= before + made

    victim = daphne_pids(obs_server)[0]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in daphne_pids(obs_server) and len(daphne_pids(obs_server)) == 2,
               what="serve to restart the killed child", timeout=120)  # fmt: skip
    # The dead child's counters stay (what it answered stays counted) and its live gauges go.
    files = {path.name for path in obs_server.metrics_dir.iterdir()}
    assert f"counter_{victim}.db" in files
    assert f"gauge_livesum_{victim}.db" not in files

    requests_on_fresh_connections(obs_server, 10, alice_key)
    wait_until(lambda: httpx.get(f"{obs_server.url}/healthz").status_code == 200, what="healthz", timeout=60)
    final = scrape(obs_server.url)
    assert total(final, "connect_http_requests_total", route=ROUTE, status="200") == before + made + 10
    assert total(final, "connect_sse_open_streams") == 0


def test_streams_are_gauged_and_their_disconnects_and_events_counted(obs_server, alice, alice_key):
    before = scrape(obs_server.url)
    closed_before = total(before, "connect_sse_disconnects_total", reason="client_gone")
    fanned_before = total(before, "connect_sse_events_fanned_out_total")
    with httpx.stream(
        "GET", f"{obs_server.url}/api/v1/events/stream", headers={"Authorization": f"Bearer {alice_key}"}, timeout=30
    ) as response:
        assert response.status_code == 200
        chunks = response.iter_raw()  # kept: a dropped generator closes the response
        assert next(chunks).startswith(b": connected")
        assert total(scrape(obs_server.url), "connect_sse_open_streams") == 1
        factories.session(alice.workspace)
        received = b""
        while b"event: session.created" not in received:
            received += next(chunks)
        # One stream open, one event: one frame handed out, in whichever process held the stream.
        assert total(scrape(obs_server.url), "connect_sse_events_fanned_out_total") == fanned_before + 1
    samples = wait_until(
        lambda: (s := scrape(obs_server.url)) and total(s, "connect_sse_open_streams") == 0 and s,
        what="the stream to close", timeout=30,
    )  # fmt: skip
    assert total(samples, "connect_sse_disconnects_total", reason="client_gone") == closed_before + 1


def test_mcp_calls_are_counted_by_method_tool_and_error(obs_server, alice_key):
    before = scrape(obs_server.url)
    with obs_server.client(headers={"Authorization": f"Bearer {alice_key}", "Accept": "application/json"}) as client:
        listed = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        unknown = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                            "params": {"name": "no_such_tool", "arguments": {}}})  # fmt: skip
        missing = client.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                            "params": {"name": "get_session", "arguments": {"sessionId": "nope"}}})  # fmt: skip
    assert listed.status_code == unknown.status_code == missing.status_code == 200
    assert missing.json()["result"]["isError"] is True
    after = scrape(obs_server.url)

    def grew(**labels) -> float:
        return total(after, "connect_mcp_calls_total", **labels) - total(before, "connect_mcp_calls_total", **labels)

    assert grew(method="tools/list", tool="", error="false") == 1
    assert grew(method="tools/call", tool="other", error="true") == 1
    assert grew(method="tools/call", tool="get_session", error="true") == 1
