"""Every result fits the budget, by construction: every tool and every resource on a 3-hour,
5,000-segment session with 50 board versions (one payload larger than a result may be), at the
default budget. Each result's text is within `CONNECT_MCP_RESULT_BUDGET_BYTES`, and the pages,
followed by their cursors and continuation URIs, add up to exactly what REST returns."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from apps.recordings import services
from apps.recordings.services import SegmentInput
from tests import factories
from tests.mcp.test_resources import rpc
from tests.mcp.test_tools import MODERN, post

SEGMENTS = 5_000
SPACING_MS = 2_160  # 5,000 segments × 2.16 s = 3 hours
WORDS = ["budget", "hiring", "roadmap", "équipe", "naïve", "Zürich", "launch", "metrics", "customer", "review"]


def segment_inputs(kind: str) -> list[SegmentInput]:
    return [
        SegmentInput(timestamp_start=i * SPACING_MS, timestamp_end=i * SPACING_MS + 2_000,
                     speaker_label=f"Speaker {i % 4 + 1}", confidence=0.9,
                     text=f"{kind} {i}: " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(12 + i % 9)))
        for i in range(SEGMENTS)
    ]  # fmt: skip


@pytest.fixture
def long_meeting(acme):
    session = factories.session(acme, label="Quarterly planning")
    services.append_committed_segments(session=session, segments=segment_inputs("live"))
    session = services.change_session_status(session=session, status="completed")
    services.write_final_transcript(session=session, segments=segment_inputs("final"))
    for version in range(10):
        for board in ("summary", "actions", "decisions", "risks"):
            services.publish_board(session=session, board_id=board, source_revision_kind="final",
                                   payload={"version": version, "items": [f"{board} item {n} " * 8 for n in range(20)]})
    for version in range(9):
        services.publish_board(session=session, board_id="notes", source_revision_kind="final",
                               payload={"version": version, "text": "note " * 500})
    # The 50th version: a payload alone larger than a result may be.
    services.publish_board(session=session, board_id="notes", source_revision_kind="final",
                           payload={"version": 9, "text": "ü" * 120_000})
    return session


def within_budget(reply) -> dict:
    assert reply.status == 200 and "result" in reply.body, reply.body
    result = reply.body["result"]
    limit = settings.CONNECT_MCP_RESULT_BUDGET_BYTES
    for content in result.get("content", []) + result.get("contents", []):
        assert len(content["text"].encode()) <= limit
    if "structuredContent" in result:
        assert len(json.dumps(result["structuredContent"], ensure_ascii=False, separators=(",", ":")).encode()) <= limit
    return result


def tool_pages(key: str, name: str, arguments: dict, version: str = "2025-11-25") -> list[dict]:
    pages, cursor = [], None
    for _ in range(200):
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": name, "arguments": {**arguments, **({"cursor": cursor} if cursor else {})}}}
        result = within_budget(post(key, message, version)[0])
        assert result["isError"] is False, result
        pages.append(result["structuredContent"])
        cursor = result["structuredContent"].get("nextCursor")
        if cursor is None:
            return pages
        assert result["structuredContent"]["note"]
    raise AssertionError("too many pages")


def resource_pages(key: str, uri: str, version: str = "2025-11-25") -> list[dict]:
    contents, next_uri = [], uri
    for _ in range(200):
        result = within_budget(rpc(key, "resources/read", {"uri": next_uri}, version))
        content = result["contents"][0]
        contents.append(content)
        next_uri = content.get("_meta", {}).get("nextUri")
        if next_uri is None:
            return contents
        assert content["_meta"]["note"]
    raise AssertionError("too many pages")


def line(segment: dict) -> str:
    seconds, ms = divmod(segment["timestampStart"], 1000)
    return f"[{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{ms:03d}] " \
           f"{segment['speakerLabel']}: {segment['text']}"


def test_every_tool_pages_within_the_budget_and_the_pages_are_the_whole(api, alice_key, long_meeting):
    for version in ("2025-11-25", MODERN):  # one session built for both generations
        tools_within_budget(api, alice_key, long_meeting.id, version)


def tools_within_budget(api, alice_key, sid, version):
    rest = api.get(f"/api/v1/sessions/{sid}/transcript", alice_key).json()["transcript"]
    assert len(rest) == SEGMENTS and rest[-1]["timestampStart"] >= 3 * 3600 * 1000 - 2 * SPACING_MS

    pages = tool_pages(alice_key, "get_transcript", {"sessionId": sid, "limit": 500}, version)
    assert len(pages) > 10 and all(p["totalSegments"] == SEGMENTS for p in pages)
    assert [s for p in pages for s in p["transcript"]] == rest

    text = tool_pages(alice_key, "get_transcript", {"sessionId": sid, "format": "text"}, version)
    assert "".join(p["text"] for p in text).splitlines() == [line(s) for s in rest]
    assert len(text) < len(pages)  # the text format holds more segments per result

    hour = 3_600_000
    window = tool_pages(alice_key, "get_transcript", {"sessionId": sid, "from": hour, "to": 2 * hour}, version)
    assert [s for p in window for s in p["transcript"]] == [s for s in rest if hour <= s["timestampStart"] < 2 * hour]

    listed = api.get(f"/api/v1/sessions/{sid}/boards", alice_key).json()["items"]
    boards = tool_pages(alice_key, "list_boards", {"sessionId": sid}, version)
    items = [item for page in boards for item in page["items"]]
    assert len(listed) == 50 and [i["id"] for i in items] == [b["id"] for b in listed]
    omitted = [i for i in items if i.get("payloadOmitted")]
    assert [(i["boardId"], i["version"]) for i in omitted] == [("notes", 10)]
    assert any(f"connect://sessions/{sid}/boards/notes/versions/10" in p.get("note", "") for p in boards)

    board = tool_pages(alice_key, "get_board", {"sessionId": sid, "boardSpecId": "notes"}, version)[0]
    assert board["board"]["payloadOmitted"] is True and "payload" not in board["board"]
    contents = resource_pages(alice_key, f"connect://sessions/{sid}/boards/notes/versions/10", version)
    assert len(contents) > 2
    assert json.loads("".join(c["text"] for c in contents)) == api.get(
        f"/api/v1/sessions/{sid}/boards/notes", alice_key).json()

    for name, arguments in [("list_sessions", {"limit": 100}), ("get_session", {"sessionId": sid}),
                            ("search_transcripts", {"query": "budget", "limit": 100}),
                            ("get_board", {"sessionId": sid, "boardSpecId": "summary"})]:
        tool_pages(alice_key, name, arguments, version)


def test_every_resource_pages_within_the_budget_and_the_pages_are_the_whole(api, alice_key, long_meeting):
    for version in ("2025-11-25", MODERN):
        resources_within_budget(api, alice_key, long_meeting.id, version)


def resources_within_budget(api, alice_key, sid, version):
    base = f"connect://sessions/{sid}"
    flat = api.get(f"/api/v1/sessions/{sid}/transcript", alice_key).json()

    pages = resource_pages(alice_key, f"{base}/transcript", version)
    bodies = [json.loads(c["text"]) for c in pages]
    assert len(pages) > 10 and all(b["sessionId"] == sid for b in bodies)
    assert [s for b in bodies for s in b["transcript"]] == flat["transcript"]
    assert pages[0]["_meta"]["totalSegments"] == SEGMENTS

    for kind in ("committed", "final"):
        rest = api.get(f"/api/v1/sessions/{sid}/transcripts", alice_key, revisionKind=kind).json()["transcripts"][0]
        text = resource_pages(alice_key, f"{base}/transcripts/{kind}?format=text", version)
        assert all(c["mimeType"] == "text/plain" for c in text)
        assert "".join(c["text"] for c in text).splitlines() == [line(s) for s in rest["segments"]]
        hour = 3_600_000
        window = resource_pages(alice_key, f"{base}/transcripts/{kind}?from={hour}&to={2 * hour}", version)
        revisions = [json.loads(c["text"])["transcripts"][0] for c in window]
        assert all({k: v for k, v in r.items() if k != "segments"} == {k: v for k, v in rest.items()
                                                                       if k != "segments"} for r in revisions)
        assert [s for r in revisions for s in r["segments"]] == [
            s for s in rest["segments"] if hour <= s["timestampStart"] < 2 * hour]

    for uri in (base, f"{base}/boards/summary", f"{base}/boards/summary/versions/3"):
        assert len(resource_pages(alice_key, uri, version)) == 1
    notes = resource_pages(alice_key, f"{base}/boards/notes", version)
    assert json.loads("".join(c["text"] for c in notes)) == api.get(
        f"/api/v1/sessions/{sid}/boards/notes", alice_key).json()

    within_budget(rpc(alice_key, "resources/list", {}, version))
    within_budget(rpc(alice_key, "resources/templates/list", {}, version))
    within_budget(rpc(alice_key, "completion/complete", {
        "ref": {"type": "ref/resource", "uri": "connect://sessions/{sessionId}"},
        "argument": {"name": "sessionId", "value": ""}}, version))
