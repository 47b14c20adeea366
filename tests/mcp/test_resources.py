"""Resources, templates and completion through `apps.mcp.consumer.answer` (authentication,
protocol and resources as one request runs them), on both protocol generations: every read is
the REST answer, scopes and tenancy are REST's, a missing resource is -32602 (2026-07-28) or
-32002 (2025), and the modern results carry their caching hints."""

from __future__ import annotations

import json

import pytest

from apps.mcp import protocol
from apps.mcp.resources import TEMPLATES
from apps.recordings import services
from tests import factories
from tests.mcp.test_tools import MODERN, post

LEGACY = "2025-11-25"
BOTH = [LEGACY, MODERN]


def rpc(key: str, method: str, params: dict, version: str = LEGACY):
    headers_name = params.get("uri") if method == "resources/read" else None
    message = {"jsonrpc": "2.0", "id": 7, "method": method, "params": dict(params)}
    if version == MODERN and headers_name is not None:
        return _modern_read(key, message)
    reply, _ = post(key, message, version)
    return reply


def _modern_read(key: str, message: dict):
    # resources/read mirrors its uri in Mcp-Name (streamable-http.mdx "Server Validation").
    from apps.mcp.consumer import answer

    message["params"]["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                                  "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}",
               "mcp-protocol-version": MODERN, "mcp-method": "resources/read", "mcp-name": message["params"]["uri"]}
    reply, _ = answer(headers, json.dumps(message).encode(), set())
    return reply


def result(reply) -> dict:
    assert reply.status == 200 and "result" in reply.body, reply.body
    return reply.body["result"]


def read(key: str, uri: str, version: str = LEGACY) -> dict:
    contents = result(rpc(key, "resources/read", {"uri": uri}, version))["contents"]
    assert len(contents) == 1 and contents[0]["uri"] == uri
    return contents[0]


def read_json(key: str, uri: str, version: str = LEGACY) -> dict:
    content = read(key, uri, version)
    assert content["mimeType"] == "application/json" and "_meta" not in content
    return json.loads(content["text"])


@pytest.fixture
def meeting(acme):
    session = factories.session(acme, label="Budget review", committed=["we discuss the budget", "and hiring"],
                                final=["We discuss the budget.", "And hiring.", "Then lunch."])
    services.publish_board(session=session, board_id="summary", payload={"v": 1}, source_revision_kind="committed")
    services.publish_board(session=session, board_id="summary", payload={"v": 2}, source_revision_kind="final")
    return session


@pytest.fixture
def secret(globex):
    return factories.session(globex, label="Secret", final=["budget secrets"])


# --- Templates and the list ----------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", *BOTH])
def test_templates_name_sessions_transcripts_and_boards(alice_key, version):
    body = result(rpc(alice_key, "resources/templates/list", {}, version))
    templates = body["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == [t["uriTemplate"] for t in TEMPLATES]
    assert "connect://sessions/{sessionId}/transcript{?format,from,to}" in [t["uriTemplate"] for t in templates]
    assert all(("icons" in t) == (version != "2025-06-18") for t in templates)
    if version == MODERN:
        assert (body["ttlMs"], body["cacheScope"]) == (protocol.LIST_TTL_MS, "public")
    else:
        assert "ttlMs" not in body


@pytest.mark.parametrize("version", BOTH)
def test_list_pages_through_the_workspaces_sessions_newest_first(alice_key, acme, secret, version):
    created = factories.sessions_at_distinct_times(acme, 60)
    seen, cursor = [], None
    for _ in range(5):
        body = result(rpc(alice_key, "resources/list", {"cursor": cursor} if cursor else {}, version))
        seen += [r["uri"] for r in body["resources"]]
        assert all(r["mimeType"] == "application/json" for r in body["resources"])
        if version == MODERN:
            assert body["cacheScope"] == "private" and body["ttlMs"] >= 0
        cursor = body.get("nextCursor")
        if cursor is None:
            break
    assert seen == [f"connect://sessions/{s.id}" for s in reversed(created)]


def test_list_without_the_sessions_scope_is_empty(alice, meeting):
    key = factories.api_key(alice, ["svc:transcripts:read"])
    assert result(rpc(key, "resources/list", {}))["resources"] == []


# --- Reads are REST's answers --------------------------------------------------------------------


@pytest.mark.parametrize("version", BOTH)
def test_reads_are_the_rest_answers(api, alice_key, meeting, version):
    sid = meeting.id
    base = f"connect://sessions/{sid}"
    assert read_json(alice_key, base, version) == api.get(f"/api/v1/sessions/{sid}", alice_key).json()
    assert read_json(alice_key, f"{base}/transcript", version) == api.get(
        f"/api/v1/sessions/{sid}/transcript", alice_key).json()
    for kind in ("committed", "final"):
        assert read_json(alice_key, f"{base}/transcripts/{kind}", version) == api.get(
            f"/api/v1/sessions/{sid}/transcripts", alice_key, revisionKind=kind).json()
    assert read_json(alice_key, f"{base}/boards/summary", version) == api.get(
        f"/api/v1/sessions/{sid}/boards/summary", alice_key).json()
    old = read_json(alice_key, f"{base}/boards/summary/versions/1", version)["board"]
    listed = api.get(f"/api/v1/sessions/{sid}/boards", alice_key).json()["items"]
    assert {k: v for k, v in old.items() if k not in ("payload", "payloadHash")} == listed[1]
    assert old["payload"] == {"v": 1}


def test_transcript_as_text_is_one_timestamped_line_per_segment(alice_key, meeting):
    content = read(alice_key, f"connect://sessions/{meeting.id}/transcript?format=text")
    assert content["mimeType"] == "text/plain"
    assert content["text"] == ("[00:00:00.000] Speaker 1: We discuss the budget.\n"
                               "[00:00:02.000] Speaker 1: And hiring.\n"
                               "[00:00:04.000] Speaker 1: Then lunch.\n")


def test_window_keeps_the_segments_that_start_in_it(api, alice_key, meeting):
    rest = api.get(f"/api/v1/sessions/{meeting.id}/transcript", alice_key).json()
    body = read_json(alice_key, f"connect://sessions/{meeting.id}/transcript?from=2000&to=4000")
    assert body == {**rest, "transcript": rest["transcript"][1:2]}
    text = read(alice_key, f"connect://sessions/{meeting.id}/transcripts/committed?format=text&from=2000")["text"]
    assert text == "[00:00:02.000] Speaker 1: and hiring\n"


@pytest.mark.parametrize(("query", "what"), [("format=xml", "format"), ("from=-1", "from"), ("from=5&to=5", "to"),
                                             ("colour=red", "colour"), ("from=1&from=2", "from")])
def test_bad_parameters_are_invalid_params(alice_key, meeting, query, what):
    reply = rpc(alice_key, "resources/read", {"uri": f"connect://sessions/{meeting.id}/transcript?{query}"})
    assert reply.body["error"]["code"] == -32602 and what in reply.body["error"]["message"]


# --- Tenancy, scopes, not found ------------------------------------------------------------------


@pytest.mark.parametrize(("version", "code", "status"), [(LEGACY, -32002, 200), (MODERN, -32602, 400)])
@pytest.mark.parametrize("path", ["", "/transcript", "/transcripts/final", "/boards/summary",
                                  "/boards/summary/versions/1"])
def test_another_workspaces_resource_reads_as_not_found(alice_key, secret, version, code, status, path):
    services.publish_board(session=secret, board_id="summary", payload={"v": 1}, source_revision_kind="final")
    uri = f"connect://sessions/{secret.id}{path}"
    reply = rpc(alice_key, "resources/read", {"uri": uri}, version)
    assert reply.status == status
    assert reply.body["error"] == {"code": code, "message": "Resource not found", "data": {"uri": uri}}


@pytest.mark.parametrize("uri", ["connect://sessions/", "connect://boards/x", "https://example.com/x",
                                 "connect://sessions/abc/transcripts/draft",
                                 "connect://sessions/abc/boards/x/versions/y", "connect://sessions/nope"])
def test_unknown_uris_are_not_found(alice_key, uri):
    assert rpc(alice_key, "resources/read", {"uri": uri}).body["error"]["code"] == -32002


@pytest.mark.parametrize("version", BOTH)
def test_a_read_needs_the_scope_rest_needs(alice, meeting, version):
    key = factories.api_key(alice, ["svc:sessions:read"])
    assert read_json(key, f"connect://sessions/{meeting.id}", version)["session"]["id"] == meeting.id
    reply = rpc(key, "resources/read", {"uri": f"connect://sessions/{meeting.id}/transcript"}, version)
    assert reply.status == 403
    assert reply.body["error"]["code"] == -32600
    assert reply.body["error"]["data"] == {"error": "insufficient_scope", "scope": "svc:transcripts:read"}


@pytest.mark.parametrize("version", BOTH)
def test_modern_reads_are_private_and_short_lived(alice_key, meeting, version):
    body = result(rpc(alice_key, "resources/read", {"uri": f"connect://sessions/{meeting.id}"}, version))
    if version == MODERN:
        assert (body["cacheScope"], body["ttlMs"]) == ("private", protocol.RESOURCE_TTL_MS)
        assert body["resultType"] == "complete"
    else:
        assert "cacheScope" not in body


# --- Large documents come in slices --------------------------------------------------------------


def test_a_board_larger_than_the_budget_comes_in_slices_that_join_to_the_whole(api, alice_key, meeting, settings):
    settings.CONNECT_MCP_RESULT_BUDGET_BYTES = 5_000
    services.publish_board(session=meeting, board_id="notes", payload={"text": "é" * 9_000},
                           source_revision_kind="final")
    uri = f"connect://sessions/{meeting.id}/boards/notes"
    texts, next_uri = [], uri
    for _ in range(20):
        content = read(alice_key, next_uri)
        assert len(content["text"].encode()) <= 5_000 and content["mimeType"] == "application/json"
        texts.append(content["text"])
        assert content["_meta"]["note"]
        next_uri = content["_meta"].get("nextUri")
        if next_uri is None:
            break
    assert len(texts) > 3
    assert json.loads("".join(texts)) == api.get(f"/api/v1/sessions/{meeting.id}/boards/notes", alice_key).json()


# --- Completion ----------------------------------------------------------------------------------


def complete(key, template, name, value, context=None, version=LEGACY):
    params = {"ref": {"type": "ref/resource", "uri": template}, "argument": {"name": name, "value": value}}
    if context:
        params["context"] = {"arguments": context}
    return result(rpc(key, "completion/complete", params, version))["completion"]


@pytest.mark.parametrize("version", BOTH)
def test_completion_suggests_session_ids_by_label_prefix_newest_first(alice_key, acme, secret, version):
    sessions = factories.sessions_at_distinct_times(acme, 3)  # "Session 0" … "Session 2"
    factories.session(acme, label="Budget")
    template = TEMPLATES[1]["uriTemplate"]
    found = complete(alice_key, template, "sessionId", "sess", version=version)
    assert found == {"values": [s.id for s in reversed(sessions)], "total": 3, "hasMore": False}
    assert complete(alice_key, template, "sessionId", "secret")["values"] == []  # another workspace's


def test_completion_of_board_ids_and_fixed_choices(alice_key, meeting):
    template = TEMPLATES[4]["uriTemplate"]
    assert complete(alice_key, template, "boardSpecId", "s", {"sessionId": meeting.id})["values"] == ["summary"]
    assert complete(alice_key, template, "version", "", {"sessionId": meeting.id, "boardSpecId": "summary"})[
        "values"] == ["2", "1"]
    assert complete(alice_key, TEMPLATES[2]["uriTemplate"], "revisionKind", "f")["values"] == ["final"]


def test_completion_of_an_unknown_template_is_invalid_params(alice_key):
    reply = rpc(alice_key, "completion/complete", {"ref": {"type": "ref/resource", "uri": "connect://x/{y}"},
                                                   "argument": {"name": "y", "value": ""}})
    assert reply.body["error"]["code"] == -32602


@pytest.mark.parametrize("version", ["2025-03-26", *BOTH])
def test_capabilities_declare_resources_subscribe_on_2026_only_and_completions(alice_key, version):
    if version == MODERN:
        capabilities = result(rpc(alice_key, "server/discover", {}, MODERN))["capabilities"]
    else:
        capabilities = result(rpc(alice_key, "initialize", {"protocolVersion": version, "capabilities": {}},
                                  version))["capabilities"]
    # subscriptions/listen on 2026-07-28; the 2025 generations keep no session to hold a subscription.
    subscribe = version == MODERN
    assert capabilities["resources"] == {"subscribe": subscribe, "listChanged": subscribe}
    assert capabilities["completions"] == {}


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_segment_larger_than_a_result_comes_alone_cut_and_says_so(alice_key, acme, settings, fmt):
    settings.CONNECT_MCP_RESULT_BUDGET_BYTES = 5_000
    session = factories.session(acme, committed=["short", "word " * 3_000, "after"])
    contents, next_uri = [], f"connect://sessions/{session.id}/transcript?format={fmt}"
    for _ in range(5):
        content = read(alice_key, next_uri)
        assert len(content["text"].encode()) <= 5_000
        contents.append(content)
        next_uri = content.get("_meta", {}).get("nextUri")
        if next_uri is None:
            break
    assert len(contents) == 3  # "short", the long one alone, "after"
    note = contents[1]["_meta"]["note"]
    assert "Segment 2 alone is larger than one result" in note and f"/api/v1/sessions/{session.id}/transcript" in note
    alone = read(alice_key, f"connect://sessions/{session.id}/transcript?format={fmt}&from=2000&to=4000")
    assert "Segment 1 alone is larger than one result" in alone["_meta"]["note"] and "nextUri" not in alone["_meta"]
