"""The JSON-RPC rules of /mcp, one test per rule, against the pure protocol core with a fake
tool registry (no database, no HTTP): versions, headers, batches, malformed bodies.

Sources: modelcontextprotocol/modelcontextprotocol docs/specification/2026-07-28/
(basic/index.mdx, basic/versioning.mdx, basic/transports/streamable-http.mdx,
server/tools.mdx, server/discover.mdx, server/utilities/caching.mdx) and 2025-03-26/2025-11-25
(basic/transports.mdx, basic/lifecycle.mdx, basic/index.mdx "Batching")."""

from __future__ import annotations

import base64
import json

import pytest

from apps.mcp import protocol
from apps.mcp.protocol import respond

MODERN = "2026-07-28"


class FakeTools:
    def definitions(self, version):
        return [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}, "v": version}]

    def knows(self, name):
        return name == "echo"

    def call(self, name, arguments, version):
        return {"content": [{"type": "text", "text": json.dumps(arguments)}], "isError": False}

    def server_info(self, version):
        return protocol.SERVER_INFO

    resources = None  # the protocol tests call no resource method


TOOLS = FakeTools()


def post(body, headers=None, **kwargs):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return respond({k.lower(): v for k, v in (headers or {}).items()}, raw, TOOLS, **kwargs)


def meta(version=MODERN, **extra):
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        **extra,
    }


def modern(method, params=None, *, rid=1, headers=None, name=None):
    params = {"_meta": meta(), **(params or {})}
    h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        h["Mcp-Name"] = name
    h.update(headers or {})
    return post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, h)


def request(method, params=None, rid=1):
    message = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


# --- Malformed bodies --------------------------------------------------------------------------


def test_body_that_is_not_json_is_a_parse_error():
    reply = post(b"{not json")
    assert reply.status == 400
    assert reply.body["error"]["code"] == -32700 and reply.body["id"] is None


@pytest.mark.parametrize("body", [{"id": 1, "method": "ping"}, {"jsonrpc": "1.0", "id": 1, "method": "ping"},
                                  {"jsonrpc": "2.0", "id": 1, "method": 5},
                                  {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, 42, "text"])
def test_non_request_json_is_an_invalid_request(body):
    reply = post(body, {"MCP-Protocol-Version": "2025-11-25"})
    assert reply.status == 400 and reply.body["error"]["code"] == -32600


@pytest.mark.parametrize("rid", [None, True, 1.5, {"a": 1}])
def test_request_id_must_be_a_string_or_an_integer(rid):
    reply = post(request("ping", rid=rid), {"MCP-Protocol-Version": "2025-11-25"})
    assert reply.body["error"]["code"] == -32600


# --- Legacy revisions ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_initialize_echoes_a_supported_version(version):
    reply = post(request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "t", "version": "1"}}))
    assert reply.status == 200
    result = reply.body["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"] == protocol.CAPABILITIES
    assert result["serverInfo"]["name"] == "connect"


@pytest.mark.parametrize("asked", ["2024-11-05", "2099-01-01", MODERN])
def test_initialize_with_another_version_answers_the_latest_legacy_one(asked):
    reply = post(request("initialize", {"protocolVersion": asked, "capabilities": {}}))
    assert reply.body["result"]["protocolVersion"] == "2025-11-25"


def test_initialize_without_a_version_is_invalid_params():
    assert post(request("initialize", {})).body["error"]["code"] == -32602


def test_initialized_notification_is_accepted_without_a_body():
    reply = post({"jsonrpc": "2.0", "method": "notifications/initialized"}, {"MCP-Protocol-Version": "2025-11-25"})
    assert (reply.status, reply.body) == (202, None)


def test_a_client_response_is_accepted_without_a_body():
    reply = post({"jsonrpc": "2.0", "id": 7, "result": {}}, {"MCP-Protocol-Version": "2025-06-18"})
    assert (reply.status, reply.body) == (202, None)


def test_ping_answers_an_empty_result():
    reply = post(request("ping", rid="p"), {"MCP-Protocol-Version": "2025-11-25"})
    assert reply.body == {"jsonrpc": "2.0", "id": "p", "result": {}}


def test_no_session_is_needed_a_request_stands_alone():
    # Stateless: tools/list works without any initialize before it.
    reply = post(request("tools/list"), {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": "whatever"})
    assert reply.status == 200 and reply.body["result"]["tools"][0]["name"] == "echo"


def test_legacy_results_carry_no_modern_fields():
    result = post(request("tools/list"), {"MCP-Protocol-Version": "2025-06-18"}).body["result"]
    assert "resultType" not in result and "ttlMs" not in result


def test_missing_version_header_is_taken_as_2025_03_26():
    result = post(request("tools/list")).body["result"]
    assert result["tools"][0]["v"] == "2025-03-26"


@pytest.mark.parametrize("header", ["2024-11-05", "2025-13-01", "garbage"])
def test_unsupported_version_header_is_400_with_the_supported_list(header):
    reply = post(request("tools/list"), {"MCP-Protocol-Version": header})
    assert reply.status == 400
    error = reply.body["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": list(protocol.SUPPORTED_VERSIONS), "requested": header}


def test_unknown_method_is_method_not_found():
    reply = post(request("prompts/list"), {"MCP-Protocol-Version": "2025-11-25"})
    assert (reply.status, reply.body["error"]["code"]) == (200, -32601)


def test_unknown_tool_is_invalid_params():
    reply = post(request("tools/call", {"name": "nope", "arguments": {}}), {"MCP-Protocol-Version": "2025-11-25"})
    assert reply.body["error"]["code"] == -32602
    assert "nope" in reply.body["error"]["message"]


@pytest.mark.parametrize("params", [{}, {"name": 5}, {"name": "echo", "arguments": [1]}])
def test_malformed_tool_call_is_invalid_params(params):
    reply = post(request("tools/call", params), {"MCP-Protocol-Version": "2025-11-25"})
    assert reply.body["error"]["code"] == -32602


def test_tools_list_has_one_page_so_a_cursor_is_invalid():
    reply = post(request("tools/list", {"cursor": "abc"}), {"MCP-Protocol-Version": "2025-11-25"})
    assert reply.body["error"]["code"] == -32602


# --- Batches: 2025-03-26 only ------------------------------------------------------------------


def test_2025_03_26_batch_answers_each_request_in_an_array():
    batch = [request("ping", rid=1), {"jsonrpc": "2.0", "method": "notifications/x"}, request("tools/list", rid=2)]
    reply = post(batch, {"MCP-Protocol-Version": "2025-03-26"})
    assert reply.status == 200
    assert [r["id"] for r in reply.body] == [1, 2]
    assert reply.body[0]["result"] == {}


def test_headerless_batch_is_2025_03_26_too():
    assert post([request("ping", rid=1)]).status == 200


def test_batch_of_notifications_only_is_202():
    reply = post([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
    assert (reply.status, reply.body) == (202, None)


def test_initialize_must_not_be_batched():
    reply = post([request("initialize", {"protocolVersion": "2025-03-26"}, rid=1), request("ping", rid=2)])
    assert reply.body[0]["error"]["code"] == -32600 and reply.body[1]["result"] == {}


def test_empty_batch_is_an_invalid_request():
    reply = post([])
    assert reply.status == 400 and reply.body["error"]["code"] == -32600


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_batches_were_removed_in_2025_06_18(version):
    reply = post([request("ping")], {"MCP-Protocol-Version": version})
    assert reply.status == 400 and reply.body["error"]["code"] == -32600


def test_modern_revision_refuses_batches():
    reply = post([request("ping")], {"MCP-Protocol-Version": MODERN})
    assert reply.status == 400 and reply.body["error"]["code"] == -32600


# --- 2026-07-28 ----------------------------------------------------------------------------------


def test_discover_names_versions_capabilities_and_identity():
    reply = modern("server/discover")
    assert reply.status == 200
    result = reply.body["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == list(protocol.SUPPORTED_VERSIONS)
    assert MODERN in result["supportedVersions"] and "2025-03-26" in result["supportedVersions"]
    assert result["capabilities"] == {"tools": {"listChanged": False}, "completions": {},
                                      "resources": {"subscribe": True, "listChanged": True}}  # subscriptions/listen
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "connect"
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0 and result["cacheScope"] == "public"


def test_tools_list_is_cacheable_and_complete():
    result = modern("tools/list").body["result"]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == protocol.LIST_TTL_MS and result["cacheScope"] == "public"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == protocol.SERVER_INFO
    assert result["tools"][0]["v"] == MODERN


def test_tools_call_result_is_complete_with_server_identity():
    reply = modern("tools/call", {"name": "echo", "arguments": {"a": 1}}, name="echo")
    result = reply.body["result"]
    assert result["resultType"] == "complete" and result["content"][0]["text"] == '{"a": 1}'
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"]


def test_client_info_is_optional():
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                        "io.modelcontextprotocol/clientCapabilities": {}}}
    reply = post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params},
                 {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert reply.status == 200


@pytest.mark.parametrize("drop", [None, "io.modelcontextprotocol/protocolVersion",
                                  "io.modelcontextprotocol/clientCapabilities"])
def test_missing_per_request_fields_are_invalid_params_400(drop):
    params = {} if drop is None else {"_meta": {k: v for k, v in meta().items() if k != drop}}
    reply = post({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": params},
                 {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert reply.status == 400
    assert reply.body["error"]["code"] == -32602 and reply.body["id"] == 9


def test_unsupported_version_in_meta_and_header_is_unsupported_protocol_version():
    params = {"_meta": meta("2099-01-01")}
    reply = post({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": params},
                 {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"})
    assert reply.status == 400
    assert reply.body["id"] == 3
    assert reply.body["error"]["code"] == -32022
    assert reply.body["error"]["data"]["requested"] == "2099-01-01"


def test_version_header_disagreeing_with_meta_is_header_mismatch():
    params = {"_meta": meta("2025-11-25")}
    reply = post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params},
                 {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert reply.status == 400 and reply.body["error"]["code"] == -32020


def test_modern_body_without_version_header_is_header_mismatch():
    reply = post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}},
                 {"Mcp-Method": "tools/list"})
    assert reply.status == 400 and reply.body["error"]["code"] == -32020


@pytest.mark.parametrize("method_header", [None, "prompts/list", "TOOLS/LIST"])
def test_mcp_method_header_must_match_the_body(method_header):
    headers = {"MCP-Protocol-Version": MODERN}
    if method_header:
        headers["Mcp-Method"] = method_header
    reply = post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}, headers)
    assert reply.status == 400 and reply.body["error"]["code"] == -32020


@pytest.mark.parametrize("name_header", [None, "other"])
def test_mcp_name_header_must_match_the_tool_name(name_header):
    reply = modern("tools/call", {"name": "echo", "arguments": {}}, name=name_header)
    assert reply.status == 400 and reply.body["error"]["code"] == -32020


def test_mcp_name_header_may_be_base64_encoded():
    encoded = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
    assert modern("tools/call", {"name": "echo"}, name=encoded).status == 200
    assert modern("tools/call", {"name": "echo"}, name="=?base64?!!!?=").body["error"]["code"] == -32020


def test_duplicated_routing_header_is_header_mismatch():
    params = {"_meta": meta()}
    reply = respond({"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
                    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}).encode(),
                    TOOLS, duplicated={"mcp-method"})
    assert reply.status == 400 and reply.body["error"]["code"] == -32020


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "prompts/list"])
def test_removed_and_unknown_methods_are_404_method_not_found(method):
    reply = modern(method, rid="r")
    assert reply.status == 404
    assert reply.body == {"jsonrpc": "2.0", "id": "r", "error": {"code": -32601,
                                                                 "message": f"Method not found: {method}"}}


def test_unknown_tool_is_invalid_params_400():
    reply = modern("tools/call", {"name": "nope", "arguments": {}}, name="nope")
    assert reply.status == 400 and reply.body["error"]["code"] == -32602


def test_modern_notification_is_accepted_without_a_body():
    reply = post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}},
                 {"MCP-Protocol-Version": MODERN, "Mcp-Method": "notifications/cancelled"})
    assert (reply.status, reply.body) == (202, None)


def test_modern_revision_refuses_a_posted_response():
    reply = post({"jsonrpc": "2.0", "id": 1, "result": {}}, {"MCP-Protocol-Version": MODERN})
    assert reply.status == 400 and reply.body["error"]["code"] == -32600


def test_base64_header_values_decode():
    assert protocol.decode_header_value("=?base64?" + base64.b64encode("héllo".encode()).decode() + "?=") == "héllo"
    assert protocol.decode_header_value("plain") == "plain"
    assert protocol.decode_header_value("=?base64?aGk?=") is None  # not canonical padding


def test_routing_headers_fold_names_strip_values_and_spot_duplicates():
    headers, duplicated = protocol.routing_headers(
        [(b"MCP-METHOD", b"  tools/list "), (b"mcp-method", b"tools/list"), (b"X-Other", b"1"), (b"x-other", b"2")]
    )
    assert headers["mcp-method"] == "tools/list" and duplicated == {"mcp-method"}
