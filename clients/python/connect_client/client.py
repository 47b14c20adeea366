"""`Connect` and `AsyncConnect`: one surface, two ways to wait.

The resources are written once. Each method describes its request and how its answer is read,
and hands that to the client's runner: the sync runner sends it and returns the result, the
async runner returns an awaitable of it. Lists return a `Paginator` (`AsyncPaginator`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import httpx

from . import models
from ._http import AsyncTransport, RetryPolicy, SyncTransport, credential_headers
from ._resource import _one, _Resource, _seg, _timestamp
from .ingest import Ingest
from .pagination import AsyncPaginator, ListCall, Paginator
from .stream import AsyncEventStream, EventStream

TRANSCRIPT_FORMATS = ("json", "vtt", "srt", "txt")

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


def _csv(value: str | Iterable[str] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return ",".join(value)


def _filters(entries: Iterable[Mapping[str, Any] | models.WebhookFilter]) -> list[dict[str, Any]]:
    return [e.to_wire() if isinstance(e, models.WebhookFilter) else dict(e) for e in entries]


def _many(model: type[models.Model], key: str) -> Callable[[httpx.Response], Any]:
    return lambda response: [model.from_wire(item) for item in response.json()[key]]


def _nothing(response: httpx.Response) -> None:
    return None


class Sessions(_Resource):
    def list(self, *, status: str | Iterable[str] | None = None, created_after: datetime | str | None = None,
             created_before: datetime | str | None = None, limit: int | None = None) -> Paginator[models.Session]:
        """Newest first; `status` one or more, `created_after` / `created_before` exclusive bounds."""
        params = {"status": _csv(status), "limit": limit,
                  "createdAfter": None if created_after is None else _timestamp(created_after),
                  "createdBefore": None if created_before is None else _timestamp(created_before)}
        return self._list(ListCall("/api/v1/sessions", params, models.Session.from_wire))

    def get(self, session_id: str) -> models.Session:
        return self._call("GET", f"/api/v1/sessions/{_seg(session_id)}", _one(models.Session, "session"))


class Transcripts(_Resource):
    def get(self, session_id: str, *, format: str = "json",
            max_cue_chars: int | None = None) -> models.Transcript | str:
        """The session's flat transcript: a `Transcript` for `json`; the exported text for
        `vtt`, `srt` and `txt` (`max_cue_chars` splits long cues, vtt and srt only)."""
        return self._transcript(f"/api/v1/sessions/{_seg(session_id)}/transcript", {}, format, max_cue_chars,
                                _one(models.Transcript))

    def revisions(self, session_id: str, *, revision_kind: str | None = None, format: str = "json",
                  max_cue_chars: int | None = None) -> list[models.TranscriptRevision] | str:
        """Committed and final revisions (or one kind); exported text for `vtt`, `srt`, `txt`."""
        return self._transcript(f"/api/v1/sessions/{_seg(session_id)}/transcripts", {"revisionKind": revision_kind},
                                format, max_cue_chars, _many(models.TranscriptRevision, "transcripts"))

    def _transcript(self, path: str, params: dict[str, Any], format: str, max_cue_chars: int | None,
                    parse: Any) -> Any:
        if format not in TRANSCRIPT_FORMATS:
            raise ValueError(f"format must be one of {', '.join(TRANSCRIPT_FORMATS)}")
        params = {**params, "maxCueChars": max_cue_chars}
        if format != "json":
            params["format"] = format
        params = {name: value for name, value in params.items() if value is not None}
        return self._call("GET", path, parse if format == "json" else (lambda response: response.text),
                          params=params or None)

    def search(self, query: str, *, revision_kind: str | None = None,
               limit: int | None = None) -> Paginator[models.SearchHit]:
        return self._list(ListCall("/api/v1/transcripts/search",
                                   {"query": query, "revisionKind": revision_kind, "limit": limit},
                                   models.SearchHit.from_wire))


class Boards(_Resource):
    def list(self, session_id: str) -> list[models.BoardSummary]:
        return self._call("GET", f"/api/v1/sessions/{_seg(session_id)}/boards", _many(models.BoardSummary, "items"))

    def get(self, session_id: str, board_spec_id: str) -> models.Board:
        return self._call("GET", f"/api/v1/sessions/{_seg(session_id)}/boards/{_seg(board_spec_id)}",
                          _one(models.Board, "board"))


class Events(_Resource):
    def list(self, *, after: str | None = None, type: str | Iterable[str] | None = None,
             session_id: str | None = None, limit: int | None = None) -> Paginator[models.Event]:
        """The event log, oldest first, after `after` (an `evt_` id or a previous cursor).
        Iteration ends with everything committed so far; `.next_cursor` is where to poll next."""
        call = ListCall("/api/v1/events", {"type": _csv(type), "sessionId": session_id, "limit": limit},
                        models.Event.from_wire, cursor_param="after", log=True)
        return self._list(call, after)

    def get(self, event_id: str) -> models.Event:
        return self._call("GET", f"/api/v1/events/{_seg(event_id)}", _one(models.Event))

    def stream(self, *, filters: Iterable[Mapping[str, Any]] | None = None, last_event_id: str | None = None,
               **options: Any) -> EventStream | AsyncEventStream:
        """Every matching event once, in order, across reconnects (see `EventStream`)."""
        return self._client._stream(filters=list(filters) if filters is not None else None,
                                    last_event_id=last_event_id, **options)


class Webhooks(_Resource):
    def list(self, *, limit: int | None = None) -> Paginator[models.Webhook]:
        return self._list(ListCall("/api/v1/webhooks", {"limit": limit}, models.Webhook.from_wire))

    def create(self, *, name: str, url: str,
               filters: Iterable[Mapping[str, Any] | models.WebhookFilter],
               signing: str | None = None) -> models.Webhook:
        """`signing="standard-webhooks"`: the result's `signing_secret` (shown this once)."""
        body: dict[str, Any] = {"name": name, "url": url, "filters": _filters(filters)}
        if signing is not None:
            body["signing"] = signing
        return self._call("POST", "/api/v1/webhooks", _one(models.Webhook), json=body)

    def get(self, webhook_id: str) -> models.Webhook:
        return self._call("GET", f"/api/v1/webhooks/{_seg(webhook_id)}", _one(models.Webhook))

    def update(self, webhook_id: str, *, name: str | None = None, url: str | None = None,
               filters: Iterable[Mapping[str, Any] | models.WebhookFilter] | None = None,
               active: bool | None = None, signing: str | None = None) -> models.Webhook:
        body: dict[str, Any] = {}
        if signing is not None:
            body["signing"] = signing
        if name is not None:
            body["name"] = name
        if url is not None:
            body["url"] = url
        if filters is not None:
            body["filters"] = _filters(filters)
        if active is not None:
            body["active"] = active
        return self._call("PATCH", f"/api/v1/webhooks/{_seg(webhook_id)}", _one(models.Webhook), json=body)

    def delete(self, webhook_id: str) -> None:
        return self._call("DELETE", f"/api/v1/webhooks/{_seg(webhook_id)}", _nothing)

    def rotate_secret(self, webhook_id: str, *, grace_seconds: int | None = None) -> models.Webhook:
        """A new Standard Webhooks secret (`signing_secret`); the old one signs beside it for
        `grace_seconds` (the server's default: one day)."""
        body = {"graceSeconds": grace_seconds} if grace_seconds is not None else {}
        return self._call("POST", f"/api/v1/webhooks/{_seg(webhook_id)}/rotate-secret", _one(models.Webhook),
                          json=body)

    def test(self, webhook_id: str) -> models.Delivery:
        """Send one signed test request; the test delivery."""
        return self._call("POST", f"/api/v1/webhooks/{_seg(webhook_id)}/test", _one(models.Delivery))

    def replay(self, delivery_id: str) -> models.Delivery:
        """Same as `deliveries.replay`."""
        return self._client.deliveries.replay(delivery_id)

    def recover(self, webhook_id: str, *, since: datetime | str,
                until: datetime | str | None = None) -> models.Recovery:
        """Queue again what this endpoint missed in the window (`queued`, and `more` when the
        server's per-call cap left some: call again with the same window)."""
        body = {"since": _timestamp(since), **({"until": _timestamp(until)} if until is not None else {})}
        return self._call("POST", f"/api/v1/webhooks/{_seg(webhook_id)}/recover", _one(models.Recovery), json=body)


class Deliveries(_Resource):
    def list(self, *, endpoint_id: str | None = None, status: str | None = None, event_type: str | None = None,
             event_id: str | None = None, kind: str | None = None,
             limit: int | None = None) -> Paginator[models.Delivery]:
        """Newest first."""
        params = {"endpointId": endpoint_id, "status": status, "eventType": event_type, "eventId": event_id,
                  "kind": kind, "limit": limit}
        return self._list(ListCall("/api/v1/webhook-deliveries", params, models.Delivery.from_wire))

    def get(self, delivery_id: str) -> models.Delivery:
        """With its attempts."""
        return self._call("GET", f"/api/v1/webhook-deliveries/{_seg(delivery_id)}", _one(models.Delivery))

    def replay(self, delivery_id: str) -> models.Delivery:
        """A new delivery of the same event (terminal deliveries only)."""
        return self._call("POST", f"/api/v1/webhook-deliveries/{_seg(delivery_id)}/replay", _one(models.Delivery))


class _Base:
    def _attach(self) -> None:
        self.sessions = Sessions(self)
        self.transcripts = Transcripts(self)
        self.boards = Boards(self)
        self.events = Events(self)
        self.webhooks = Webhooks(self)
        self.deliveries = Deliveries(self)
        self.ingest = Ingest(self)


class Connect(_Base):
    """`Connect("https://connect.example.com", api_key="svc_…")` (or `token=` for OAuth, or
    `ingest_key=` for a recorder, which calls `client.ingest` only)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, token: str | None = None,
                 ingest_key: str | None = None, timeout: float = 30.0, retry: RetryPolicy | None = None,
                 http_client: httpx.Client | None = None) -> None:
        self._transport = SyncTransport(base_url, credential_headers(api_key, token, ingest_key), timeout=timeout,
                                        retry=retry or RetryPolicy(), http=http_client)
        self.base_url = self._transport.base_url
        self._attach()

    def _run(self, method: str, path: str, parse: Callable[[httpx.Response], Any], **kwargs: Any) -> Any:
        return parse(self._transport.request(method, path, **kwargs))

    def _paginate(self, call: ListCall, start: str | None) -> Paginator:
        return Paginator(self._transport, call, start)

    def _stream(self, **kwargs: Any) -> EventStream:
        return EventStream(self, **kwargs)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Connect:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncConnect(_Base):
    """The same surface as `Connect`; every call is awaited, lists are `async for`."""

    def __init__(self, base_url: str, *, api_key: str | None = None, token: str | None = None,
                 ingest_key: str | None = None, timeout: float = 30.0, retry: RetryPolicy | None = None,
                 http_client: httpx.AsyncClient | None = None) -> None:
        self._transport = AsyncTransport(base_url, credential_headers(api_key, token, ingest_key), timeout=timeout,
                                         retry=retry or RetryPolicy(), http=http_client)
        self.base_url = self._transport.base_url
        self._attach()

    async def _run(self, method: str, path: str, parse: Callable[[httpx.Response], Any], **kwargs: Any) -> Any:
        return parse(await self._transport.request(method, path, **kwargs))

    def _paginate(self, call: ListCall, start: str | None) -> AsyncPaginator:
        return AsyncPaginator(self._transport, call, start)

    def _stream(self, **kwargs: Any) -> AsyncEventStream:
        return AsyncEventStream(self, **kwargs)

    async def aclose(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> AsyncConnect:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
