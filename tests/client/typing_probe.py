"""What `mypy --strict` must infer for the client's surface: tests/client/test_typing.py
type-checks this file (it is never run). Each `type: ignore[…]` marks a call that must be
refused; `--strict` reports an ignore that is not needed, so a `Literal` or an overload that
was lost fails the check."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, assert_type

from connect_client import (APIResponse, AsyncConnect, AsyncEventStream, AsyncPaginator, Board, BoardSummary,
                            Connect, Delivery, EventStream, Page, Paginator, Session, Transcript,
                            TranscriptRevision, Webhook)


def sync(client: Connect) -> None:
    assert_type(client.sessions.get("s"), Session)
    assert_type(client.sessions.list(status=["completed", "failed"]), Paginator[Session])
    assert_type(client.transcripts.get("s"), Transcript)
    assert_type(client.transcripts.get("s", format="json"), Transcript)
    assert_type(client.transcripts.get("s", format="vtt", max_cue_chars=40), str)
    assert_type(client.transcripts.revisions("s", revision_kind="final"), list[TranscriptRevision])
    assert_type(client.transcripts.revisions("s", format="txt"), str)
    assert_type(client.boards.list("s"), list[BoardSummary])
    assert_type(client.boards.get("s", "summary"), Board)
    assert_type(client.deliveries.list(status="dead_letter", kind="test"), Paginator[Delivery])
    assert_type(client.webhooks.delete("wh"), None)
    assert_type(client.events.stream(filters=[{"type": "session.created"}]), EventStream)
    assert_type(client.sessions.with_raw_response.get("s"), APIResponse[Session])
    assert_type(client.sessions.with_raw_response.list(limit=1), APIResponse[Page[Session]])
    assert_type(client.transcripts.with_raw_response.get("s", format="srt"), APIResponse[str])
    assert_type(client.transcripts.with_raw_response.get("s"), APIResponse[Transcript])
    assert_type(client.sessions.with_raw_response.get("s").request_id, str | None)

    client.sessions.list(status="paused")  # type: ignore[arg-type]
    client.transcripts.get("s", format="pdf")  # type: ignore[call-overload]
    client.transcripts.search("q", revision_kind="draft")  # type: ignore[arg-type]
    client.deliveries.list(status="failed")  # type: ignore[arg-type]
    client.events.stream(filters=[{"type": "session.deleted"}])  # type: ignore[list-item]
    client.ingest.sessions.set_status("x", "recording")  # type: ignore[arg-type]


async def asynchronous(client: AsyncConnect) -> None:
    assert_type(client.sessions.get("s"), Coroutine[Any, Any, Session]).close()  # a coroutine, not a Session
    assert_type(await client.sessions.get("s"), Session)
    assert_type(await client.transcripts.get("s"), Transcript)
    assert_type(await client.transcripts.get("s", format="txt"), str)
    assert_type(await client.boards.list("s"), list[BoardSummary])
    assert_type(client.sessions.list(), AsyncPaginator[Session])
    assert_type(await client.sessions.list().page(), Page[Session])
    assert_type(client.events.stream(), AsyncEventStream)
    assert_type(await client.sessions.with_raw_response.get("s"), APIResponse[Session])
    assert_type(await client.webhooks.with_raw_response.list(), APIResponse[Page[Webhook]])
    assert_type(await client.transcripts.with_raw_response.get("s", format="vtt"), APIResponse[str])
    client.sessions.list(status="paused")  # type: ignore[arg-type]
