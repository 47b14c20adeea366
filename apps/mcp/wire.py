"""The JSON-RPC wire of /mcp, shared by both protocol generations: versions, error codes, the
server's constants, replies and errors, and the request headers' rules. Pure: no Django imports.
How a request is answered is apps/mcp/protocol.py."""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

MODERN_VERSION = "2026-07-28"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")  # newest first
SUPPORTED_VERSIONS = (MODERN_VERSION, *LEGACY_VERSIONS)
LATEST_LEGACY = LEGACY_VERSIONS[0]
HEADERLESS_VERSION = "2025-03-26"  # transports: no header and no other way to know → 2025-03-26
BATCH_VERSIONS = frozenset({"2025-03-26"})  # batching was removed in 2025-06-18
STRUCTURED_OUTPUT_VERSIONS = frozenset({"2025-06-18", "2025-11-25", MODERN_VERSION})

# JSON-RPC 2.0 and MCP error codes (2026-07-28 basic/index.mdx "Error Codes").
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022
# A read the credential's scopes do not allow: -32600 with `data.error` naming it, HTTP 403 as
# for REST (authorization/index.mdx "Runtime Insufficient Scope Errors" answers 403).
INSUFFICIENT_SCOPE = "insufficient_scope"
# resources.mdx "Error Handling": a missing resource is -32602 from 2026-07-28, -32002 before.
LEGACY_RESOURCE_NOT_FOUND = -32002

logger = logging.getLogger("connect.mcp")

# Modern HTTP statuses for protocol errors (streamable-http.mdx: unknown method → 404, the
# per-request-field, header and version failures → 400).
MODERN_ERROR_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

SERVER_INFO = {"name": "connect", "title": "Connect", "version": "1.0.0"}
INSTRUCTIONS = (
    "Read-only access to one workspace's recorded sessions: their metadata, transcripts and AI "
    "board contents. Start with list_sessions (newest first) or search_transcripts (full-text), "
    "then use the session id with get_session, get_transcript, list_boards or get_board. "
    "Results that have more pages carry nextCursor: pass it back as cursor to continue; a result "
    "that is not the whole answer says so in its note. Sessions, transcripts and boards are also "
    "resources (connect://sessions/{sessionId}/transcript and the other templates)."
)
# tools/list, resources/templates/list and server/discover change only when Connect is
# deployed, and are the same for every caller, so any cache may keep them for a while
# (server/utilities/caching.mdx).
LIST_TTL_MS = 300_000
# resources/list and resources/read are the workspace's data (private) and change as meetings
# are recorded: fresh for a few seconds only.
RESOURCE_TTL_MS = 5_000
# The 2025 generations: no resource subscriptions (`resources/subscribe` needs a session to
# hold them, and no era keeps one).
CAPABILITIES = {
    "tools": {"listChanged": False},
    "resources": {"subscribe": False, "listChanged": False},
    "completions": {},
}
# 2026-07-28: `subscriptions/listen` serves `resourceSubscriptions` and `resourcesListChanged`
# (apps/mcp/listen.py); the tools change only with a deploy.
MODERN_CAPABILITIES = {
    "tools": {"listChanged": False},
    "resources": {"subscribe": True, "listChanged": True},
    "completions": {},
}

# Routing headers a body value is mirrored into; a duplicate would let two readers disagree.
ROUTING_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name")
NAME_BEARING_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_B64_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status and a JSON body (None → no body, as for 202)."""

    status: int
    body: Any = None


class ProtocolError(Exception):
    """A JSON-RPC error; `status` overrides the modern era's HTTP status for its code."""

    def __init__(self, code: int, message: str, data: Any = None, *, status: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data, self.status = code, message, data, status


def resource_not_found(version: str, uri: str) -> ProtocolError:
    code = INVALID_PARAMS if version == MODERN_VERSION else LEGACY_RESOURCE_NOT_FOUND
    return ProtocolError(code, "Resource not found", {"uri": uri})


class Resources(Protocol):
    """What the protocol needs of the resources (apps/mcp/resources.py); their errors are
    ProtocolErrors."""

    def templates(self, version: str) -> list[dict[str, Any]]: ...

    def list(self, cursor: str | None, version: str) -> dict[str, Any]: ...

    def read(self, uri: str, version: str) -> dict[str, Any]: ...

    def complete(self, params: dict[str, Any]) -> dict[str, Any]: ...


class Tools(Protocol):
    """What the protocol needs from the tool registry (apps/mcp/tools.py)."""

    def definitions(self, version: str) -> list[dict[str, Any]]: ...

    def knows(self, name: str) -> bool: ...

    def call(self, name: str, arguments: dict[str, Any], version: str) -> dict[str, Any]: ...

    def server_info(self, version: str) -> dict[str, Any]: ...

    @property
    def resources(self) -> Resources: ...


def error_object(code: int, message: str, data: Any = None, request_id: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def unsupported_version(requested: Any, request_id: Any = None) -> Reply:
    data = {"supported": list(SUPPORTED_VERSIONS), "requested": requested if isinstance(requested, str) else ""}
    return Reply(400, error_object(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data, request_id))


def decode_header_value(value: str | None) -> str | None:
    """`Mcp-Name` may carry `=?base64?…?=` (streamable-http.mdx "Value Encoding"); a malformed
    one decodes to None so it never matches a body value by accident."""
    if value is None:
        return None
    match = _B64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _valid_id(value: Any) -> bool:
    # MCP: a string or an integer, never null (basic/index.mdx "Requests").
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _meta_of(message: Any) -> Mapping[str, Any] | None:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else None


def declares_modern(message: Any) -> bool:
    meta = _meta_of(message)
    return meta is not None and META_VERSION in meta


def routing_headers(raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], set[str]]:
    """ASGI raw headers → lower-cased names with stripped values (RFC 9110 OWS), and the
    routing headers that appeared more than once."""
    headers: dict[str, str] = {}
    duplicated: set[str] = set()
    for name_bytes, value_bytes in raw:
        name = name_bytes.decode("latin-1").lower()
        if name in headers and name in ROUTING_HEADERS:
            duplicated.add(name)
        headers[name] = value_bytes.decode("latin-1").strip()
    return headers, duplicated


def media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def accepts_json(accept: str | None) -> bool:
    if not accept:
        return True
    types = {media_type(part) for part in accept.split(",")}
    return bool(types & {"application/json", "application/*", "*/*"})
