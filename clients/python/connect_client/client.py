"""`Connect` and `AsyncConnect`: one surface, two ways to wait.

Each has its own resource classes (`Sessions`, `AsyncSessions`, …, in `resources/`), so every
method is annotated as what it returns: a model for `Connect`, a coroutine of it for
`AsyncConnect`. What they share is below the resources (each operation's `Request`, the
transport's retry rule, the ETag cache), not above.

Configuration: `base_url` else `CONNECT_BASE_URL`; one of `api_key=`, `token=`, `ingest_key=`
else `CONNECT_API_KEY`; neither given nor set is a `ConfigurationError` that says both ways.
"""

from __future__ import annotations

from typing import TypeVar

import httpx

from ._http import AsyncTransport, RetryPolicy, SyncTransport, base_url_from, credential_headers
from ._response import DEFAULT_CACHE_BYTES, APIResponse, ETagCache, Exchange, Request
from .resources import (AsyncBoards, AsyncDeliveries, AsyncEvents, AsyncIngest, AsyncSessions, AsyncTranscripts,
                        AsyncWebhooks, Boards, Deliveries, Events, Ingest, Sessions, Transcripts, Webhooks)

T = TypeVar("T")

# Every REST operation of /openapi.json and the client method that performs it
# (tests/client/test_openapi_sync.py fails when the API has one this map lacks).
OPERATIONS: dict[str, str] = {
    "listSessions": "sessions.list",
    "getSession": "sessions.get",
    "getTranscript": "transcripts.get",
    "listTranscriptRevisions": "transcripts.revisions",
    "searchTranscripts": "transcripts.search",
    "listBoards": "boards.list",
    "getBoard": "boards.get",
    "listEvents": "events.list",
    "getEvent": "events.get",
    "streamEvents": "events.stream",
    "listWebhooks": "webhooks.list",
    "createWebhook": "webhooks.create",
    "getWebhook": "webhooks.get",
    "updateWebhook": "webhooks.update",
    "deleteWebhook": "webhooks.delete",
    "testWebhook": "webhooks.test",
    "recoverWebhook": "webhooks.recover",
    "rotateWebhookSecret": "webhooks.rotate_secret",
    "listWebhookDeliveries": "deliveries.list",
    "getWebhookDelivery": "deliveries.get",
    "replayWebhookDelivery": "deliveries.replay",
    "ingestPutSession": "ingest.sessions.upsert",
    "ingestAppendSegments": "ingest.sessions.append_segments",
    "ingestSetStatus": "ingest.sessions.set_status",
    "ingestPutFinalTranscript": "ingest.sessions.put_final_transcript",
    "ingestPutBoard": "ingest.sessions.put_board",
}


class Connect:
    """`Connect("https://connect.example.com", api_key="svc_…")` (or `token=` for OAuth, or
    `ingest_key=` for a recorder, which calls `client.ingest` only); `Connect()` reads
    `CONNECT_BASE_URL` and `CONNECT_API_KEY`. `etag_cache_bytes` bounds the conditional-GET
    cache (0 turns it off)."""

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None, token: str | None = None,
                 ingest_key: str | None = None, timeout: float = 30.0, retry: RetryPolicy | None = None,
                 http_client: httpx.Client | None = None, etag_cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        url = base_url_from(base_url)
        self._transport = SyncTransport(url, credential_headers(api_key, token, ingest_key), timeout=timeout,
                                        retry=retry or RetryPolicy(), http=http_client)
        self.base_url = url
        self.etag_cache = ETagCache(etag_cache_bytes)
        self._exchanges = Exchange(self.etag_cache)
        self.sessions = Sessions(self)
        self.transcripts = Transcripts(self)
        self.boards = Boards(self)
        self.events = Events(self)
        self.webhooks = Webhooks(self)
        self.deliveries = Deliveries(self)
        self.ingest = Ingest(self)

    def _exchange(self, request: Request[T]) -> APIResponse[T]:
        headers, entry = self._exchanges.prepare(request)
        response = self._transport.request(request.method, request.path, params=request.query(),
                                           json=request.json, headers=headers)
        return self._exchanges.finish(request, response, entry)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Connect:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncConnect:
    """The same surface as `Connect`; every call is awaited, lists are `async for`."""

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None, token: str | None = None,
                 ingest_key: str | None = None, timeout: float = 30.0, retry: RetryPolicy | None = None,
                 http_client: httpx.AsyncClient | None = None, etag_cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        url = base_url_from(base_url)
        self._transport = AsyncTransport(url, credential_headers(api_key, token, ingest_key), timeout=timeout,
                                         retry=retry or RetryPolicy(), http=http_client)
        self.base_url = url
        self.etag_cache = ETagCache(etag_cache_bytes)
        self._exchanges = Exchange(self.etag_cache)
        self.sessions = AsyncSessions(self)
        self.transcripts = AsyncTranscripts(self)
        self.boards = AsyncBoards(self)
        self.events = AsyncEvents(self)
        self.webhooks = AsyncWebhooks(self)
        self.deliveries = AsyncDeliveries(self)
        self.ingest = AsyncIngest(self)

    async def _exchange(self, request: Request[T]) -> APIResponse[T]:
        headers, entry = self._exchanges.prepare(request)
        response = await self._transport.request(request.method, request.path, params=request.query(),
                                                 json=request.json, headers=headers)
        return self._exchanges.finish(request, response, entry)

    async def aclose(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> AsyncConnect:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
