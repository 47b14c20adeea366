"""`POST /mcp` in /openapi.json. It is a Channels route, not a DRF view, so it is described
here: a JSON-RPC 2.0 message in, a JSON-RPC response (or 202) out, with the HTTP-level
errors every Bearer endpoint has. The tools themselves are listed by `tools/list`."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from apps.core.errors import ingest_key_reads_nothing
from apps.core.openapi import EXAMPLE_REQUEST_ID
from apps.mcp.protocol import SUPPORTED_VERSIONS
from apps.mcp.tools import TOOLS

JSONRPC_MESSAGE = {
    "type": "object",
    "description": "A JSON-RPC 2.0 request or notification (2025-03-26 also accepts a batch array).",
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": {"type": ["string", "integer"]},
        "method": {"type": "string"},
        "params": {"type": "object"},
    },
    "required": ["jsonrpc", "method"],
}
JSONRPC_RESPONSE = {
    "type": "object",
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": {"type": ["string", "integer", "null"]},
        "result": {"type": "object"},
        "error": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
            "required": ["code", "message"],
        },
    },
    "required": ["jsonrpc", "id"],
}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _refusal_examples() -> dict[str, Any]:
    """/mcp's HTTP 403s (a tool's missing scope is a tool result, not a 403)."""
    scopes = settings.CONNECT_READ_SCOPES
    ingest_key = {"error": "insufficient_scope", "detail": ingest_key_reads_nothing(scopes), "requiredScopes": scopes,
                  "requestId": EXAMPLE_REQUEST_ID}
    forbidden = {"error": "forbidden", "requestId": EXAMPLE_REQUEST_ID}
    return {"insufficient_scope": {"summary": "insufficient_scope: an ingest key", "value": ingest_key},
            "forbidden": {"summary": "forbidden", "value": forbidden}}


def extend(schema: dict[str, Any]) -> None:
    error = {"$ref": "#/components/schemas/Error"}
    tools = ", ".join(f"`{tool.name}` ({tool.scope})" for tool in TOOLS)
    header = {"type": "string"}
    schema["paths"]["/mcp"] = {
        "post": {
            "operationId": "mcp",
            "summary": "Model Context Protocol tool endpoint (Streamable HTTP, stateless, JSON responses)",
            "description": (
                f"Protocol revisions {', '.join(SUPPORTED_VERSIONS)}. Tools: {tools}. A credential without a "
                "tool's scope gets a tool result with `isError: true` and `{\"error\":\"insufficient_scope\", "
                "\"detail\": …, \"requiredScopes\": [the tool's scope]}`. "
                "Resources (`connect://sessions/{sessionId}`, its transcript and boards; `resources/templates/list`) "
                "need the scope of the REST read they mirror. Every result fits `CONNECT_MCP_RESULT_BUDGET_BYTES`, "
                "paging with a note. GET and DELETE answer 405. See docs/mcp.md."
            ),
            "tags": ["mcp"],
            "security": [{"bearerAuth": []}, {"oauth2": ["svc:sessions:read", "svc:transcripts:read",
                                                          "svc:boards:read"]}],
            "parameters": [
                {"in": "header", "name": "MCP-Protocol-Version", "required": False, "schema": header,
                 "description": "the negotiated (legacy) or requested (2026-07-28) protocol version"},
                {"in": "header", "name": "Mcp-Method", "required": False, "schema": header,
                 "description": "2026-07-28: the body's method"},
                {"in": "header", "name": "Mcp-Name", "required": False, "schema": header,
                 "description": "2026-07-28: the tool name of a tools/call, the uri of a resources/read"},
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"oneOf": [
                    JSONRPC_MESSAGE, {"type": "array", "items": JSONRPC_MESSAGE}]}}},
            },
            "responses": {
                "200": _json("JSON-RPC response (an array for a 2025-03-26 batch)",
                             {"oneOf": [JSONRPC_RESPONSE, {"type": "array", "items": JSONRPC_RESPONSE}]}),
                "202": {"description": "notification or client response accepted"},
                "400": _json("JSON-RPC error: parse error, invalid request or params, header mismatch (-32020), "
                             "unsupported protocol version (-32022)", JSONRPC_RESPONSE),
                "401": {**_json("`unauthorized`; `detail` says what is wrong with the Authorization header, and "
                                "WWW-Authenticate names the protected-resource document", error),
                        "headers": {"WWW-Authenticate": {"schema": header}}},
                "403": {**_json("`forbidden` (issuer no longer an active member), `insufficient_scope` (an "
                                "ingest key, which reads nothing), or a JSON-RPC error when the Origin or Host is "
                                "not allowed, or a resource read the credential's scopes do not allow (-32600, "
                                "`data.error` insufficient_scope)", {"oneOf": [error, JSONRPC_RESPONSE]}),
                        "content": {"application/json": {"schema": {"oneOf": [error, JSONRPC_RESPONSE]},
                                                         "examples": _refusal_examples()}}},
                "404": _json("`workspace_not_found`, or (2026-07-28) JSON-RPC method not found",
                             {"oneOf": [error, JSONRPC_RESPONSE]}),
                "405": _json("`method_not_allowed` (GET, DELETE: no SSE stream, no sessions)", error),
                "406": _json("Accept does not allow application/json", JSONRPC_RESPONSE),
                "413": _json("request body too large", JSONRPC_RESPONSE),
                "415": _json("Content-Type is not application/json", JSONRPC_RESPONSE),
            },
        }
    }
