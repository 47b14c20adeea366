"""Retries: idempotent GETs wait out `429 rate_limited` (its `Retry-After`), `503` and
connection errors within a bounded budget; nothing else is retried. Against a live `serve`
whose rate limit is 3 requests per 10-second window. Windows are fixed, so the tests that count
requests first wait for a fresh window (a burst that straddled a boundary would get a fresh
allowance halfway)."""

from __future__ import annotations

import email.utils
import time

import connect_client
import httpx
import pytest
from connect_client import RetryPolicy

from tests import factories
from tests.servers import free_port, start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LIMITED_ENV = {"CONNECT_RATE_LIMIT_PER_CREDENTIAL": "3", "CONNECT_RATE_LIMIT_WINDOW_SECONDS": "10"}


def fresh_window(url: str, key: str) -> int:
    """Requests left to `key` in a window that has at least 5 s to run (one is spent asking)."""
    while True:
        response = httpx.get(f"{url}/api/v1/webhooks", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        reset = float(response.headers.get("RateLimit-Reset") or response.headers.get("Retry-After"))
        if response.status_code == 200 and reset >= 5:
            return int(response.headers["RateLimit-Remaining"])
        time.sleep(reset + 0.2)


@pytest.fixture(scope="module")
def limited(django_db_setup, django_db_blocker, tmp_path_factory):
    server = start(tmp_path_factory.mktemp("client-limited"), env=LIMITED_ENV)
    yield server
    server.stop()


class Recorded:
    """An httpx client that records (monotonic time, method, status) of every response."""

    def __init__(self, base_url: str) -> None:
        self.responses: list[tuple[float, str, int, str | None]] = []
        self.requests = 0
        self.http = httpx.Client(base_url=base_url, timeout=30, event_hooks={
            "request": [self._request], "response": [self._response]})

    def _request(self, request: httpx.Request) -> None:
        self.requests += 1

    def _response(self, response: httpx.Response) -> None:
        self.responses.append((time.monotonic(), response.request.method, response.status_code,
                               response.headers.get("Retry-After")))


def test_gets_wait_out_429_with_retry_after_and_succeed(limited, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    session = factories.session(alice.workspace)
    fresh_window(limited.url, key)  # so the five cannot all fit across a window's end
    recorded = Recorded(limited.url)
    # Without the ETag cache: with it, the repeats are 304s, which the rate limit gives back.
    with connect_client.Connect(limited.url, api_key=key, http_client=recorded.http, etag_cache_bytes=0,
                                retry=RetryPolicy(max_retries=5, max_retry_wait=30)) as client:
        for _ in range(5):
            assert client.sessions.get(session.id).id == session.id
    statuses = [status for _, _, status, _ in recorded.responses]
    assert statuses.count(200) == 5 and 429 in statuses
    for (at, _, status, retry_after), (next_at, _, _, _) in zip(recorded.responses, recorded.responses[1:]):
        if status == 429:
            assert retry_after is not None
            assert next_at - at >= float(retry_after) * 0.95  # waited as asked (never less)


def test_without_budget_the_429_is_raised_with_its_retry_after(limited, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    remaining = fresh_window(limited.url, key)
    recorded = Recorded(limited.url)
    with connect_client.Connect(limited.url, api_key=key, http_client=recorded.http,
                                retry=RetryPolicy(max_retry_wait=0.1)) as client:
        with pytest.raises(connect_client.RateLimited) as caught:
            for _ in range(10):
                list(client.sessions.list())
    error = caught.value
    assert (error.status, error.code) == (429, "rate_limited") and error.retry_after > 0.1
    assert recorded.requests == remaining + 1  # the allowed ones, then one refused: no wait over budget


def test_writes_are_never_retried(limited, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    remaining = fresh_window(limited.url, key)
    recorded = Recorded(limited.url)
    with connect_client.Connect(limited.url, api_key=key, http_client=recorded.http) as client:
        for _ in range(remaining):
            list(client.webhooks.list())
        with pytest.raises(connect_client.RateLimited):
            client.webhooks.create(name="x", url="https://hooks.example.com/x", filters=[{"type": "session.created"}])
    assert [method for _, method, _, _ in recorded.responses] == ["GET"] * remaining + ["POST"]


def test_connection_errors_are_retried_for_gets_within_the_budget():
    port = free_port()  # nothing listens there
    recorded = Recorded(f"http://127.0.0.1:{port}")
    with connect_client.Connect(f"http://127.0.0.1:{port}", api_key="svc_x", http_client=recorded.http,
                                retry=RetryPolicy(max_retries=2, base_delay=0.05)) as client:
        with pytest.raises(httpx.ConnectError):
            client.sessions.get("x")
        assert recorded.requests == 3
        with pytest.raises(httpx.ConnectError):
            client.webhooks.delete("wh_x")
        assert recorded.requests == 4  # a DELETE: once


def test_503_is_retried_and_a_persistent_one_raised_with_retry_after():
    # A real server answers 503 only when its database or Redis is down (tests/faults cover
    # that side); here httpx's MockTransport plays the server.
    answers = iter([503, 503, 200])
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        status = next(answers, 503)
        if status == 503:
            return httpx.Response(503, json={"error": "unavailable"}, headers={"Retry-After": "0"})
        return httpx.Response(200, json={"session": {"id": "s1", "status": "completed"}})

    http = httpx.Client(base_url="http://connect.test", transport=httpx.MockTransport(handler))
    with connect_client.Connect("http://connect.test", api_key="svc_x", http_client=http) as client:
        assert client.sessions.get("s1").status == "completed"
        assert seen == ["GET"] * 3
        with pytest.raises(connect_client.Unavailable) as caught:
            client.sessions.get("s1")
        assert caught.value.retry_after == 0 and len(seen) == 3 + 4  # 1 + max_retries (3)
        with pytest.raises(connect_client.Unavailable):
            client.deliveries.replay("dlv_x")
        assert seen[-1] == "POST" and len(seen) == 8


def test_repeated_reads_are_304s_the_rate_limit_gives_back(limited, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    session = factories.session(alice.workspace)
    remaining = fresh_window(limited.url, key)
    recorded = Recorded(limited.url)
    with connect_client.Connect(limited.url, api_key=key, http_client=recorded.http,
                                retry=RetryPolicy(max_retries=0)) as client:
        first = client.sessions.get(session.id)
        for _ in range(remaining + 3):  # more than the window allows: each 304 is given back
            assert client.sessions.get(session.id) is first
        raw = client.sessions.with_raw_response.get(session.id)
    assert [status for _, _, status, _ in recorded.responses] == [200] + [304] * (remaining + 4)
    assert raw.headers["RateLimit-Remaining"] == str(remaining - 1)  # only the 200 was counted


def answering(*responses: httpx.Response) -> tuple[httpx.Client, list[str]]:
    """An httpx client whose server answers `responses` in turn (then the last again)."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        return responses[min(len(seen), len(responses)) - 1]

    return httpx.Client(base_url="http://connect.test", transport=httpx.MockTransport(handler)), seen


RATE_LIMITED = {"error": "rate_limited"}
SESSION = {"session": {"id": "s1", "status": "completed"}}


def test_without_retry_after_the_wait_is_ratelimit_reset():
    # Our server sends both headers on a 429; a proxy may keep only RateLimit-*, so httpx's
    # MockTransport plays one. A wait of 7 s over a 5 s budget is not started: one request, and
    # the error says 7, which only RateLimit-Reset said (a backoff would be under 1 s and retried).
    http, seen = answering(httpx.Response(429, json=RATE_LIMITED, headers={"RateLimit-Reset": "7"}))
    with connect_client.Connect("http://connect.test", api_key="svc_x", http_client=http,
                                retry=RetryPolicy(max_retry_wait=5)) as client:
        with pytest.raises(connect_client.RateLimited) as caught:
            client.sessions.get("s1")
    assert caught.value.retry_after == 7 and seen == ["GET"]

    http, seen = answering(httpx.Response(429, json=RATE_LIMITED, headers={"RateLimit-Reset": "0"}),
                           httpx.Response(200, json=SESSION))
    with connect_client.Connect("http://connect.test", api_key="svc_x", http_client=http) as client:
        assert client.sessions.get("s1").status == "completed" and seen == ["GET", "GET"]


def test_retry_after_wins_and_may_be_an_http_date():
    both = {"Retry-After": "0", "RateLimit-Reset": "9"}
    http, seen = answering(httpx.Response(429, json=RATE_LIMITED, headers=both), httpx.Response(200, json=SESSION))
    with connect_client.Connect("http://connect.test", api_key="svc_x", http_client=http,
                                retry=RetryPolicy(max_retry_wait=1)) as client:
        assert client.sessions.get("s1").id == "s1" and seen == ["GET", "GET"]  # waited 0, not 9

    in_an_hour = email.utils.formatdate(time.time() + 3600, usegmt=True)
    http, seen = answering(httpx.Response(503, json={"error": "unavailable"}, headers={"Retry-After": in_an_hour}))
    with connect_client.Connect("http://connect.test", api_key="svc_x", http_client=http) as client:
        with pytest.raises(connect_client.Unavailable) as caught:
            client.sessions.get("s1")
    assert 3000 < caught.value.retry_after <= 3600 and seen == ["GET"]
