"""The six tools against the database, through `apps.mcp.consumer.answer` (authentication,
protocol and tools, as one request runs them): each result equals what REST answers, paging
works, and scope, not-found, invalid-argument and tenancy errors are tool results."""

from __future__ import annotations

import json
from datetime import timedelta

import orjson
import pytest
from django.conf import settings
from django.utils import timezone
from jsonschema import Draft202012Validator
from oauth2_provider.models import set_token_value

from apps.core.errors import UNAUTHORIZED_DETAILS, scope_detail
from apps.mcp import tools as tool_module
from apps.mcp.consumer import answer
from apps.mcp.tools import TOOLS
from apps.oauth.models import AccessToken
from apps.oauth.services import create_client
from apps.recordings import services
from apps.tenancy import services as tenancy
from tests import factories

MODERN = "2026-07-28"


def post(key: str | None, message: dict, version: str | None = "2025-11-25") -> tuple:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    if version is not None:
        headers["mcp-protocol-version"] = version
    if version == MODERN:
        message.setdefault("params", {})["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers["mcp-method"] = message["method"]
        if message["method"] == "tools/call":
            headers["mcp-name"] = message["params"]["name"]
    return answer(headers, json.dumps(message).encode(), set())


def call(key: str, name: str, arguments: dict, version: str = "2025-11-25") -> dict:
    reply, _ = post(key, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments}}, version)
    assert reply.status == 200, reply.body
    return reply.body["result"]


def ok(result: dict) -> dict:
    assert result["isError"] is False, result
    body = json.loads(result["content"][0]["text"])
    assert result["structuredContent"] == body  # the same JSON as text and as structured content
    return body


def same(body: dict) -> dict:
    """A result with its cursor's signing timestamp dropped: two cursors for the same position
    signed in different seconds differ only there."""
    cursor = body.get("nextCursor")
    return {**body, "nextCursor": cursor.split(":")[0] if cursor else cursor}


def tool_error(result: dict) -> dict:
    assert result["isError"] is True, result
    assert "structuredContent" not in result
    return json.loads(result["content"][0]["text"])


@pytest.fixture
def meeting(acme):
    session = factories.session(acme, label="Budget review", committed=["we discuss the budget", "and hiring"],
                                final=["We discuss the budget.", "And hiring.", "Then lunch."])
    services.publish_board(session=session, board_id="summary", payload={"v": 1}, source_revision_kind="committed")
    services.publish_board(session=session, board_id="summary", payload={"v": 2}, source_revision_kind="final")
    services.publish_board(session=session, board_id="actions", payload=["call Bob"], source_revision_kind="final")
    return session


@pytest.fixture
def outsider_session(globex):
    return factories.session(globex, label="Secret", final=["budget secrets"])


# --- Identical to REST ---------------------------------------------------------------------------


def test_list_sessions_is_the_rest_page(api, alice_key, meeting):
    factories.sessions_at_distinct_times(meeting.workspace, 3)
    rest = api.get("/api/v1/sessions", alice_key, limit=2).json()
    assert same(ok(call(alice_key, "list_sessions", {"limit": 2}))) == same(rest)
    rest_next = api.get("/api/v1/sessions", alice_key, limit=2, cursor=rest["nextCursor"]).json()
    assert same(ok(call(alice_key, "list_sessions", {"limit": 2, "cursor": rest["nextCursor"]}))) == same(rest_next)


def test_list_sessions_walks_every_page_once(alice_key, acme):
    created = {s.id for s in factories.sessions_at_distinct_times(acme, 7)}
    seen, cursor = [], None
    for _ in range(10):
        page = ok(call(alice_key, "list_sessions", {"limit": 3, **({"cursor": cursor} if cursor else {})}))
        seen += [item["id"] for item in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(created) and len(seen) == 7


def test_get_session_is_the_rest_session(api, alice_key, meeting):
    rest = api.get(f"/api/v1/sessions/{meeting.id}", alice_key).json()
    assert ok(call(alice_key, "get_session", {"sessionId": meeting.id})) == rest


def test_search_is_the_rest_search_with_session_level_hits(api, alice_key, meeting):
    rest = api.get("/api/v1/transcripts/search", alice_key, query="budget").json()
    body = ok(call(alice_key, "search_transcripts", {"query": "budget"}))
    assert same(body) == same(rest) and len(body["items"]) == 2
    hit = body["items"][0]
    assert {"id", "label", "status", "startedAt", "endedAt", "createdAt", "snippet"} <= set(hit)
    assert hit["id"] == meeting.id and "budget" in hit["snippet"].lower()


def test_search_pages_with_a_cursor(api, alice_key, meeting):
    first = ok(call(alice_key, "search_transcripts", {"query": "budget", "limit": 1}))
    assert len(first["items"]) == 1 and first["nextCursor"]
    second = ok(call(alice_key, "search_transcripts", {"query": "budget", "limit": 1, "cursor": first["nextCursor"]}))
    assert same(second) == same(api.get("/api/v1/transcripts/search", alice_key, query="budget", limit=1,
                                       cursor=first["nextCursor"]).json())
    assert second["items"][0]["transcriptId"] != first["items"][0]["transcriptId"]


def test_get_transcript_is_the_rest_flat_transcript(api, alice_key, meeting):
    rest = api.get(f"/api/v1/sessions/{meeting.id}/transcript", alice_key).json()
    body = ok(call(alice_key, "get_transcript", {"sessionId": meeting.id}))
    assert body == {**rest, "totalSegments": 3, "nextCursor": None}


def test_list_boards_is_every_board_content_with_its_payload(api, alice_key, meeting):
    rest = api.get(f"/api/v1/sessions/{meeting.id}/boards", alice_key).json()["items"]
    items = ok(call(alice_key, "list_boards", {"sessionId": meeting.id}))["items"]
    assert [{k: v for k, v in item.items() if k not in ("payload", "payloadHash")} for item in items] == rest
    assert [item["payload"] for item in items] == [["call Bob"], {"v": 2}, {"v": 1}]
    for item in items:
        assert item["payloadHash"] == services.payload_hash(item["payload"])


def test_get_board_is_the_rest_current_board(api, alice_key, meeting):
    rest = api.get(f"/api/v1/sessions/{meeting.id}/boards/summary", alice_key).json()
    body = ok(call(alice_key, "get_board", {"sessionId": meeting.id, "boardSpecId": "summary"}))
    assert body == rest and body["board"]["payload"] == {"v": 2}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", MODERN])
def test_every_structured_result_matches_its_output_schema(alice_key, meeting, version):
    arguments = {
        "list_sessions": {}, "get_session": {"sessionId": meeting.id}, "search_transcripts": {"query": "hiring"},
        "get_transcript": {"sessionId": meeting.id}, "list_boards": {"sessionId": meeting.id},
        "get_board": {"sessionId": meeting.id, "boardSpecId": "actions"},
    }
    reply, _ = post(alice_key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, version)
    definitions = {d["name"]: d for d in reply.body["result"]["tools"]}
    for tool in TOOLS:
        schema = definitions[tool.name]["outputSchema"]
        Draft202012Validator.check_schema(schema)
        Draft202012Validator(schema).validate(ok(call(alice_key, tool.name, arguments[tool.name], version)))


def test_2025_03_26_gets_text_content_without_structured_content(alice_key, meeting):
    result = call(alice_key, "get_session", {"sessionId": meeting.id}, "2025-03-26")
    assert "structuredContent" not in result
    assert json.loads(result["content"][0]["text"])["session"]["id"] == meeting.id


# --- Long transcripts come in pages, never cut silently -------------------------------------------


@pytest.fixture
def long_meeting(acme, settings):
    # A budget whose room (budget less the reserve) holds a few of these segments.
    settings.CONNECT_MCP_RESULT_BUDGET_BYTES = 3_000
    return factories.session(acme, committed=[f"line {i}" for i in range(10)])


def test_long_transcript_returns_the_first_page_and_says_how_to_get_the_rest(api, alice_key, long_meeting):
    rest = api.get(f"/api/v1/sessions/{long_meeting.id}/transcript", alice_key).json()["transcript"]
    first = call(alice_key, "get_transcript", {"sessionId": long_meeting.id})
    body = ok(first)
    assert 1 < len(body["transcript"]) < 10 and body["totalSegments"] == 10 and body["nextCursor"]
    assert body["transcript"] == rest[: len(body["transcript"])]
    assert "not the whole transcript" in body["note"] and "cursor" in first["content"][0]["text"]
    pages, cursor = body["transcript"], body["nextCursor"]
    for _ in range(5):
        body = ok(call(alice_key, "get_transcript", {"sessionId": long_meeting.id, "cursor": cursor}))
        pages += body["transcript"]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert pages == rest and "note" not in body


def test_transcript_limit_pages_even_short_transcripts(api, alice_key, meeting):
    body = ok(call(alice_key, "get_transcript", {"sessionId": meeting.id, "limit": 2}))
    assert len(body["transcript"]) == 2 and body["nextCursor"] and body["totalSegments"] == 3


def test_transcript_cursor_of_another_session_is_invalid(alice_key, meeting, acme):
    other = factories.session(acme, committed=["a", "b", "c"])
    cursor = ok(call(alice_key, "get_transcript", {"sessionId": other.id, "limit": 1}))["nextCursor"]
    error = tool_error(call(alice_key, "get_transcript", {"sessionId": meeting.id, "cursor": cursor}))
    assert error["error"] == "invalid_request" and error["argument"] == "cursor"


def test_transcript_cursor_goes_stale_when_the_final_revision_arrives(alice_key, acme):
    session = factories.session(acme, committed=["a", "b", "c"])
    cursor = ok(call(alice_key, "get_transcript", {"sessionId": session.id, "limit": 1}))["nextCursor"]
    services.change_session_status(session=session, status="completed")
    services.write_final_transcript(session=session, segments=factories.segments(["A", "B", "C"]))
    error = tool_error(call(alice_key, "get_transcript", {"sessionId": session.id, "cursor": cursor}))
    assert error["argument"] == "cursor"


# --- Tool errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("granted", "tool", "arguments"),
    [
        ("svc:transcripts:read", "list_sessions", {}),
        ("svc:transcripts:read", "get_session", {"sessionId": "x"}),
        ("svc:sessions:read", "search_transcripts", {"query": "budget"}),
        ("svc:sessions:read", "get_transcript", {"sessionId": "x"}),
        ("svc:sessions:read", "list_boards", {"sessionId": "x"}),
        ("svc:transcripts:read", "get_board", {"sessionId": "x", "boardSpecId": "y"}),
    ],
)
def test_missing_scope_is_an_insufficient_scope_result(alice, tool, granted, arguments):
    key = factories.api_key(alice, [granted])
    result = call(key, tool, arguments)
    assert result["isError"] is True
    needed = {t.name: t.scope for t in TOOLS}[tool]
    assert result["content"] == [{"type": "text", "text": orjson.dumps(
        {"error": "insufficient_scope", "detail": scope_detail((needed,)), "requiredScopes": [needed]}).decode()}]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_session", {"sessionId": "nope"}),
        ("get_transcript", {"sessionId": "nope"}),
        ("list_boards", {"sessionId": "nope"}),
        ("get_board", {"sessionId": "nope", "boardSpecId": "summary"}),
    ],
)
def test_unknown_ids_are_not_found(alice_key, tool, arguments):
    assert tool_error(call(alice_key, tool, arguments)) == {"error": "not_found"}


def test_unknown_board_of_a_known_session_is_not_found(alice_key, meeting):
    assert tool_error(call(alice_key, "get_board", {"sessionId": meeting.id, "boardSpecId": "nope"})) == {
        "error": "not_found"}


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_session", "sessionId"),
        ("get_transcript", "sessionId"),
        ("list_boards", "sessionId"),
        ("get_board", "sessionId"),
    ],
)
def test_another_workspaces_ids_answer_not_found(alice_key, outsider_session, tool, arguments):
    args = {arguments: outsider_session.id}
    if tool == "get_board":
        services.publish_board(session=outsider_session, board_id="s", payload={}, source_revision_kind="final")
        args["boardSpecId"] = "s"
    assert tool_error(call(alice_key, tool, args)) == {"error": "not_found"}


def test_search_never_finds_another_workspaces_transcripts(alice_key, outsider_session):
    assert ok(call(alice_key, "search_transcripts", {"query": "secrets"}))["items"] == []


@pytest.mark.parametrize(
    ("tool", "arguments", "argument"),
    [
        ("list_sessions", {"limit": 0}, "limit"),
        ("list_sessions", {"limit": 101}, "limit"),
        ("list_sessions", {"limit": "10"}, "limit"),
        ("list_sessions", {"limit": True}, "limit"),
        ("list_sessions", {"cursor": "forged"}, "cursor"),
        ("list_sessions", {"cursor": ""}, "cursor"),
        ("list_sessions", {"page": 2}, "page"),
        ("get_session", {}, "sessionId"),
        ("get_session", {"sessionId": 5}, "sessionId"),
        ("search_transcripts", {}, "query"),
        ("search_transcripts", {"query": ""}, "query"),
        ("search_transcripts", {"query": "x" * 501}, "query"),
        ("search_transcripts", {"query": "budget", "cursor": "forged"}, "cursor"),
        ("get_transcript", {"sessionId": "s", "limit": 501}, "limit"),
        ("get_transcript", {"sessionId": "s", "cursor": "forged"}, "cursor"),
        ("get_board", {"sessionId": "s"}, "boardSpecId"),
        # U+0000 is text no column holds (PostgreSQL answered 500 to it in a lookup).
        ("get_session", {"sessionId": "s\u0000"}, "sessionId"),
        ("search_transcripts", {"query": "budget\u0000"}, "query"),
        ("get_board", {"sessionId": "s", "boardSpecId": "\u0000"}, "boardSpecId"),
    ],
)
def test_invalid_arguments_are_invalid_request_naming_the_argument(alice_key, tool, arguments, argument):
    error = tool_error(call(alice_key, tool, arguments))
    assert error["error"] == "invalid_request" and error["argument"] == argument and error["detail"]


def test_another_workspaces_cursor_is_invalid(alice_key, bob_key, globex):
    factories.sessions_at_distinct_times(globex, 3)
    cursor = ok(call(bob_key, "list_sessions", {"limit": 1}))["nextCursor"]
    assert tool_error(call(alice_key, "list_sessions", {"cursor": cursor}))["argument"] == "cursor"


def test_integral_float_limit_is_an_integer(alice_key, acme):
    factories.sessions_at_distinct_times(acme, 3)
    assert len(ok(call(alice_key, "list_sessions", {"limit": 2.0}))["items"]) == 2


# --- tools/list ----------------------------------------------------------------------------------


def test_tools_list_has_the_six_tools_in_a_fixed_order_with_read_only_annotations(alice_key):
    reply, _ = post(alice_key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, MODERN)
    tools = reply.body["result"]["tools"]
    assert [t["name"] for t in tools] == ["list_sessions", "get_session", "search_transcripts", "get_transcript",
                                          "list_boards", "get_board"]
    for tool in tools:
        assert tool["annotations"] | {"title": None} == {"title": None, "readOnlyHint": True,
                                                         "destructiveHint": False, "idempotentHint": True,
                                                         "openWorldHint": False}
        Draft202012Validator.check_schema(tool["inputSchema"])
        assert len(tool["description"]) > 80
    required = {t["name"]: t["inputSchema"]["required"] for t in tools}
    assert required == {"list_sessions": [], "get_session": ["sessionId"], "search_transcripts": ["query"],
                        "get_transcript": ["sessionId"], "list_boards": ["sessionId"],
                        "get_board": ["sessionId", "boardSpecId"]}
    again, _ = post(alice_key, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, MODERN)
    assert again.body["result"]["tools"] == tools


def test_tools_list_validates_against_the_sdks_schema_types(alice_key):
    import mcp_types

    reply, _ = post(alice_key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, MODERN)
    mcp_types.ListToolsResult.model_validate(reply.body["result"])


# --- Credentials (HTTP errors, before any JSON-RPC) ------------------------------------------------


def test_missing_or_invalid_credential_is_401_pointing_at_the_protected_resource_document(db):
    for key in (None, "svc_" + "x" * 40, "not-a-key"):
        reply, extra = post(key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert (reply.status, reply.body["error"]) == (401, "unauthorized")
        assert reply.body["detail"] == UNAUTHORIZED_DETAILS["missing" if key is None else "invalid"]
        assert extra["WWW-Authenticate"].startswith(
            f'Bearer resource_metadata="{settings.CONNECT_BASE_URL}/.well-known/oauth-protected-resource"'
        )


def test_deactivated_member_is_403_forbidden(alice, alice_key):
    tenancy.deactivate_member(membership=alice)
    reply, _ = post(alice_key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert (reply.status, reply.body) == (403, {"error": "forbidden"})


def test_suspended_workspace_is_404_workspace_not_found(acme, alice_key):
    tenancy.suspend_workspace(workspace=acme)
    reply, _ = post(alice_key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert (reply.status, reply.body) == (404, {"error": "workspace_not_found"})


def test_credential_is_checked_before_the_body(db):
    reply, _ = answer({"content-type": "application/json"}, b"{broken", set())
    assert reply.status == 401


def _token(membership, resource: list[str]) -> str:
    application = create_client(name="Agent", redirect_uri="https://agent.example/cb").application
    raw = "tok-" + "m" * 40 + str(len(resource[0]) if resource else 0)
    token = AccessToken(user=membership.user, application=application, workspace=membership.workspace,
                        expires=timezone.now() + timedelta(hours=1), scope=" ".join(factories.READ_SCOPES),
                        resource=resource)
    set_token_value(token, raw)
    token.save()
    return raw


@pytest.mark.parametrize("suffix", ["", "/mcp"])
def test_oauth_tokens_for_the_base_url_and_for_mcp_are_accepted(api, alice, meeting, suffix):
    token = _token(alice, [settings.CONNECT_BASE_URL + suffix])
    assert ok(call(token, "get_session", {"sessionId": meeting.id}))["session"]["id"] == meeting.id


def test_mcp_token_stays_refused_on_rest(api, alice, meeting):
    token = _token(alice, [settings.CONNECT_BASE_URL + "/mcp"])
    assert api.get(f"/api/v1/sessions/{meeting.id}", token).status_code == 401


def test_token_for_another_resource_is_refused_at_mcp(alice):
    token = _token(alice, ["https://elsewhere.example"])
    reply, _ = post(token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert reply.status == 401


def test_media_types_are_checked_after_the_credential(alice_key):
    headers = {"authorization": f"Bearer {alice_key}", "content-type": "text/plain"}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    assert answer(headers, body, set())[0].status == 415
    headers = {"authorization": f"Bearer {alice_key}", "content-type": "application/json", "accept": "text/html"}
    assert answer(headers, body, set())[0].status == 406
    headers["accept"] = "application/json, text/event-stream"
    assert answer(headers, body, set())[0].status == 200


def test_tool_calls_share_rests_rate_limit(settings, alice_key):
    """tools.mdx: servers MUST rate limit tool invocations; /mcp counts in the same buckets."""
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 2
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    first, headers = post(alice_key, dict(message))
    assert first.status == 200 and headers["RateLimit-Limit"] == "2" and headers["RateLimit-Remaining"] == "1"
    post(alice_key, dict(message))
    refused, headers = post(alice_key, dict(message))
    assert (refused.status, refused.body) == (429, {"error": "rate_limited"})
    assert int(headers["Retry-After"]) > 0


def test_mcp_token_stays_refused_by_the_event_streams_authentication(alice):
    # apps/stream/consumer.py authenticates with authenticate_bearer's default audience.
    from apps.core.errors import Unauthorized
    from apps.access.credentials import authenticate_bearer

    token = _token(alice, [settings.CONNECT_BASE_URL + "/mcp"])
    with pytest.raises(Unauthorized):
        authenticate_bearer(f"Bearer {token}")
    assert authenticate_bearer(f"Bearer {_token(alice, [settings.CONNECT_BASE_URL])}").workspace == alice.workspace


# --- Output schemas are portable ------------------------------------------------------------------
# The rules of the MCP Inspector 2.x CLI's `--strict` tool-schema check (clients/cli, schemaLint),
# written out so they hold offline; bench/mcp_conformance.sh runs the Inspector itself.

BOOLEAN_VALUED = {"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
ONE_SUBSCHEMA = ("items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties",
                 "unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema")
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SUBSCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions")
CONSTRAINING = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "contentSchema",
    "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
    "required", "dependentRequired", "allOf", "anyOf", "oneOf", "not", "items", "prefixItems", "contains",
    "additionalItems", "unevaluatedItems", "properties", "patternProperties", "additionalProperties",
    "unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref", "$dynamicRef",
    "$recursiveRef",
}


def portability_findings(schema, path: str = "", keyword: str | None = None) -> list[str]:
    if isinstance(schema, bool):
        return [] if keyword in BOOLEAN_VALUED else [f"{path}: boolean schema"]
    if not isinstance(schema, dict):
        return []
    found = []
    if isinstance(schema.get("type"), list):
        found.append(f"{path}: type union {schema['type']}")
    if isinstance(schema.get("$ref"), str) and not schema["$ref"].startswith("#"):
        found.append(f"{path}: remote $ref")
    constrains = any(k in CONSTRAINING for k in schema) or ("if" in schema and ("then" in schema or "else" in schema))
    if not constrains and keyword != "not":
        found.append(f"{path}: untyped schema")
    for key in SUBSCHEMA_MAPS:
        for name, sub in (schema.get(key) or {}).items():
            found += portability_findings(sub, f"{path}.{key}.{name}", key)
    for key in SUBSCHEMA_LISTS:
        for i, sub in enumerate(schema.get(key) or []):
            found += portability_findings(sub, f"{path}.{key}[{i}]", key)
    for key in ONE_SUBSCHEMA:
        if key in schema:
            found += portability_findings(schema[key], f"{path}.{key}", key)
    return found


def test_the_portability_rules_find_what_the_inspector_finds():
    assert portability_findings({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}) == [
        ".properties.a: type union ['string', 'null']"]
    assert portability_findings({"type": "object", "properties": {"p": {"description": "free"}}}) == [
        ".properties.p: untyped schema"]
    assert portability_findings({"anyOf": [{"$ref": "https://x/s.json"}, True]}) == [
        ".anyOf[0]: remote $ref", ".anyOf[1]: boolean schema"]
    assert portability_findings({"type": "object", "additionalProperties": False}) == []


@pytest.mark.parametrize("version", ["2025-06-18", MODERN])
def test_every_tool_schema_is_portable(alice_key, version):
    reply, _ = post(alice_key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, version)
    tools = reply.body["result"]["tools"]
    assert len(tools) == len(TOOLS)
    for tool in tools:
        for kind in ("inputSchema", "outputSchema"):
            assert portability_findings(tool[kind], kind) == [], tool["name"]
            assert '"type": [' not in json.dumps(tool[kind])


# --- Transcript formats and windows --------------------------------------------------------------


def test_transcript_as_text_is_the_lines_and_the_cursor_when_paged(alice_key, meeting):
    result = call(alice_key, "get_transcript", {"sessionId": meeting.id, "format": "text", "limit": 2})
    lines = ["[00:00:00.000] Speaker 1: We discuss the budget.", "[00:00:02.000] Speaker 1: And hiring."]
    assert result["structuredContent"]["text"] == "\n".join(lines) + "\n"
    cursor = result["structuredContent"]["nextCursor"]
    text = result["content"][0]["text"]
    assert text.startswith("\n".join(lines)) and cursor in text and "Segments 1-2 of 3" in text
    last = call(alice_key, "get_transcript", {"sessionId": meeting.id, "format": "text", "cursor": cursor})
    assert last["content"][0]["text"] == "[00:00:04.000] Speaker 1: Then lunch.\n"


def test_transcript_window_and_its_cursor_are_bound_together(alice_key, meeting):
    body = ok(call(alice_key, "get_transcript", {"sessionId": meeting.id, "from": 2000, "limit": 1}))
    assert [s["text"] for s in body["transcript"]] == ["And hiring."] and body["totalSegments"] == 2
    error = tool_error(call(alice_key, "get_transcript", {"sessionId": meeting.id, "cursor": body["nextCursor"]}))
    assert error["argument"] == "cursor"  # issued for another window


@pytest.mark.parametrize(("arguments", "argument"), [({"format": "xml"}, "format"), ({"from": -1}, "from"),
                                                     ({"from": 10, "to": 10}, "to"), ({"to": "5"}, "to")])
def test_bad_format_or_window_is_an_invalid_argument(alice_key, meeting, arguments, argument):
    error = tool_error(call(alice_key, "get_transcript", {"sessionId": meeting.id, **arguments}))
    assert (error["error"], error["argument"]) == ("invalid_request", argument)


def test_a_memo_larger_than_a_result_is_cut_and_the_note_says_where_it_is_whole(alice_key, acme, settings):
    settings.CONNECT_MCP_RESULT_BUDGET_BYTES = 5_000
    memo = "\u0001é" * 4_000  # escapes make a character up to six bytes of JSON
    session = services.create_session(workspace=acme, label="Long memo", memo=memo)
    result = call(alice_key, "get_session", {"sessionId": session.id})
    body = ok(result)
    assert len(result["content"][0]["text"].encode()) <= 5_000
    assert memo.startswith(body["session"]["memo"]) and 0 < len(body["session"]["memo"]) < len(memo)
    assert f"GET /api/v1/sessions/{session.id}" in body["note"]
    page = ok(call(alice_key, "list_sessions", {"limit": 5}))
    assert [item["id"] for item in page["items"]] == [session.id] and "memo" in page["note"].lower()
