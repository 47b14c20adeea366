"""Against a live `serve`: configuration from the environment, `.with_raw_response` (status,
headers and request id on success), conditional reads answered from the client's ETag cache,
and errors that carry the whole body and the headers."""

from __future__ import annotations

import asyncio

import connect_client
import httpx
import pytest

from apps.recordings import services as recordings
from tests import factories

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


class Recorded:
    """An httpx client that keeps every (request's If-None-Match, response status)."""

    def __init__(self, base_url: str) -> None:
        self.exchanges: list[tuple[str | None, int]] = []
        self.http = httpx.Client(base_url=base_url, timeout=30, event_hooks={"response": [self._response]})

    def _response(self, response: httpx.Response) -> None:
        self.exchanges.append((response.request.headers.get("If-None-Match"), response.status_code))


# --- configuration ----------------------------------------------------------------------------


def test_connect_reads_the_base_url_and_the_key_from_the_environment(live, acme, key, monkeypatch):
    session = factories.session(acme, label="from the environment")
    monkeypatch.setenv("CONNECT_BASE_URL", live.url + "/")
    monkeypatch.setenv("CONNECT_API_KEY", key)
    with connect_client.Connect() as client:
        assert client.base_url == live.url
        assert client.sessions.get(session.id).label == "from the environment"

    async def asynchronous() -> str | None:
        async with connect_client.AsyncConnect() as client:
            return (await client.sessions.get(session.id)).label

    assert asyncio.run(asynchronous()) == "from the environment"

    monkeypatch.setenv("CONNECT_API_KEY", "svc_" + "x" * 40)  # arguments win over the environment
    with connect_client.Connect(live.url, api_key=key) as client:
        assert client.sessions.get(session.id).id == session.id


def test_without_arguments_or_environment_the_error_says_both_ways(monkeypatch):
    monkeypatch.delenv("CONNECT_BASE_URL", raising=False)
    monkeypatch.delenv("CONNECT_API_KEY", raising=False)
    for make in (connect_client.Connect, connect_client.AsyncConnect):
        with pytest.raises(connect_client.ConfigurationError, match="CONNECT_BASE_URL") as no_url:
            make(api_key="svc_a")
        assert "pass it" in str(no_url.value)
        with pytest.raises(connect_client.ConfigurationError, match="CONNECT_API_KEY") as no_key:
            make("http://connect.test")
        assert "api_key=" in str(no_key.value)
    assert issubclass(connect_client.ConfigurationError, ValueError)


# --- raw responses ----------------------------------------------------------------------------


def test_with_raw_response_gives_status_headers_and_request_id(live, acme, key):
    session = factories.session(acme, final=["Hello there."])
    with connect_client.Connect(live.url, api_key=key) as client:
        raw = client.sessions.with_raw_response.get(session.id)
        assert isinstance(raw, connect_client.APIResponse)
        assert raw.status_code == 200 and raw.request_id and raw.request_id.startswith("req_")
        assert raw.headers["ETag"] == raw.etag and raw.headers["content-type"] == "application/json"
        assert isinstance(raw.parse(), connect_client.Session) and raw.parse().id == session.id
        assert not raw.from_cache

        text = client.transcripts.with_raw_response.get(session.id, format="txt")
        assert text.status_code == 200 and "Hello there." in text.parse()
        assert text.headers["content-type"].startswith("text/plain")

        first = client.sessions.with_raw_response.list(limit=1)
        assert first.status_code == 200 and isinstance(first.parse(), connect_client.Page)
        assert [s.id for s in first.parse().items] == [session.id]

        with pytest.raises(connect_client.NotFound) as missing:
            client.sessions.with_raw_response.get("missing")  # errors stay exceptions
        assert missing.value.request_id

    async def asynchronous() -> None:
        async with connect_client.AsyncConnect(live.url, api_key=key) as aclient:
            araw = await aclient.sessions.with_raw_response.get(session.id)
            assert araw.status_code == 200 and araw.request_id and araw.parse().id == session.id
            page = await aclient.sessions.with_raw_response.list(limit=1)
            assert [s.id for s in page.parse().items] == [session.id]

    asyncio.run(asynchronous())


def test_with_raw_response_on_writes(live, alice):
    from apps.tenancy import services as tenancy

    with connect_client.Connect(live.url, ingest_key=tenancy.issue_ingest_key(membership=alice).key) as recorder:
        created = recorder.ingest.sessions.with_raw_response.upsert("raw-1", label="raw")
        assert created.status_code == 201 and created.request_id and created.parse().external_id == "raw-1"
        again = recorder.ingest.sessions.with_raw_response.upsert("raw-1", label="raw")
        assert again.status_code == 200 and again.parse().id == created.parse().id


# --- conditional reads ------------------------------------------------------------------------


def test_a_repeated_read_is_conditional_and_a_304_returns_the_cached_object(live, acme, key):
    session = factories.session(acme, committed=["we agreed on the budget"])
    recorded = Recorded(live.url)
    with connect_client.Connect(live.url, api_key=key, http_client=recorded.http) as client:
        first = client.sessions.get(session.id)
        second = client.sessions.get(session.id)
        assert second is first
        etag = client.sessions.with_raw_response.get(session.id)
        assert (etag.status_code, etag.from_cache, etag.parse()) == (304, True, first)
        assert etag.request_id  # a 304 has its own request id
        assert recorded.exchanges[0] == (None, 200)
        assert recorded.exchanges[1][1] == 304 and recorded.exchanges[1][0]  # sent If-None-Match

        recordings.change_session_status(session=session, status="processing")  # the tag changes
        changed = client.sessions.get(session.id)
        assert changed.status == "processing" and changed is not first and recorded.exchanges[-1][1] == 200
        assert client.sessions.get(session.id) is changed

        transcript = client.transcripts.get(session.id)
        assert client.transcripts.get(session.id) is transcript
        vtt = client.transcripts.get(session.id, format="vtt")  # another query: another entry
        assert client.transcripts.get(session.id, format="vtt") == vtt
        assert [status for _, status in recorded.exchanges[-4:]] == [200, 304, 200, 304]
        assert len(client.etag_cache) == 3 and client.etag_cache.bytes > 0


def test_the_cache_is_bounded_and_can_be_turned_off(live, acme, key):
    sessions = [factories.session(acme, label=f"S{i}") for i in range(3)]
    recorded = Recorded(live.url)
    with connect_client.Connect(live.url, api_key=key, http_client=recorded.http, etag_cache_bytes=0) as client:
        client.sessions.get(sessions[0].id)
        client.sessions.get(sessions[0].id)
        assert [sent for sent, _ in recorded.exchanges] == [None, None] and len(client.etag_cache) == 0

    with connect_client.Connect(live.url, api_key=key) as client:
        size = len(client.sessions.with_raw_response.get(sessions[0].id).http_response.content)
    with connect_client.Connect(live.url, api_key=key, etag_cache_bytes=2 * size + 10) as client:
        for s in sessions:
            client.sessions.get(s.id)
        assert len(client.etag_cache) == 2 and client.etag_cache.bytes <= 2 * size + 10
        oldest = client.sessions.with_raw_response.get(sessions[0].id)  # dropped first: asked in full
        assert (oldest.status_code, oldest.from_cache) == (200, False)


def test_the_async_client_reads_conditionally_too(live, acme, key):
    session = factories.session(acme)

    async def scenario() -> None:
        async with connect_client.AsyncConnect(live.url, api_key=key) as client:
            first = await client.sessions.get(session.id)
            again = await client.sessions.with_raw_response.get(session.id)
            assert again.status_code == 304 and again.parse() is first

    asyncio.run(scenario())


# --- errors -----------------------------------------------------------------------------------


def test_errors_carry_the_whole_body_and_the_headers(live, alice):
    narrow = factories.api_key(alice, ["svc:transcripts:read"])
    with connect_client.Connect(live.url, api_key=narrow) as client:
        with pytest.raises(connect_client.InsufficientScope) as caught:
            client.sessions.get("x")
    error = caught.value
    assert error.body["error"] == "insufficient_scope" and error.headers.get("content-type") == "application/json"
    assert {k: v for k, v in error.body.items() if k not in ("error", "requestId")} == error.extra
    if "requiredScopes" in error.body:  # the server names the scope it needs
        assert error.required_scopes == error.body["requiredScopes"]

    unknown = connect_client.errors.from_response(httpx.Response(
        403, json={"error": "insufficient_scope", "detail": "needs svc:sessions:read",
                   "requiredScopes": ["svc:sessions:read"], "hint": {"docs": "/docs"}},
        headers={"WWW-Authenticate": 'Bearer error="insufficient_scope", scope="svc:sessions:read"'}))
    assert type(unknown) is connect_client.InsufficientScope
    assert unknown.required_scopes == ["svc:sessions:read"] and unknown.detail == "needs svc:sessions:read"
    assert unknown.body["hint"] == {"docs": "/docs"} and "scope=" in unknown.headers["www-authenticate"]
