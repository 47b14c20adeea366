"""The MCP wire protocol at /mcp: JSON-RPC over one POST, for both protocol generations.

Pure: no Django imports. `respond` takes a request's headers and body and returns the HTTP
reply; everything that touches data goes through the `Tools` it is given (and its `Resources`).

Two eras share the endpoint (docs/specification/2026-07-28/basic/versioning.mdx, "dual-era"):
legacy revisions 2025-03-26, 2025-06-18 and 2025-11-25 negotiate a version with `initialize`
and then carry it in `MCP-Protocol-Version` (absent → 2025-03-26); the modern 2026-07-28 has no
handshake, and every request carries its version and capabilities in `params._meta`, mirrored
into headers that must agree with the body (HeaderMismatch). No era keeps a session. A request
is modern when its header names 2026-07-28 or its body declares a version in `_meta`; an unknown
header version gets UnsupportedProtocolVersion with the supported list, which both eras' clients
understand as "not this version" (docs/decisions/mcp.md)."""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from apps.core import context, metrics

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
CAPABILITIES = {
    "tools": {"listChanged": False},
    "resources": {"subscribe": False, "listChanged": False},
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


def respond(headers: Mapping[str, str], body: bytes, tools: Tools, *, duplicated: set[str] | None = None) -> Reply:
    """One POST to /mcp. `headers` are lower-cased names with stripped values; `duplicated`
    names the routing headers that appeared more than once."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return Reply(400, error_object(PARSE_ERROR, "Parse error: the body is not JSON"))

    header_version = headers.get("mcp-protocol-version")
    modern = header_version == MODERN_VERSION or (header_version is None and declares_modern(message))
    if modern:
        return respond_modern(headers, message, tools, duplicated or set())
    if header_version is not None and header_version not in LEGACY_VERSIONS:
        return unsupported_version(header_version, message.get("id") if isinstance(message, dict) else None)
    version = header_version or HEADERLESS_VERSION
    if isinstance(message, list):
        if version not in BATCH_VERSIONS:
            return Reply(400, error_object(INVALID_REQUEST, f"JSON-RPC batches are not part of MCP {version}"))
        return respond_batch(message, tools)
    answer = legacy_message(message, version, tools)
    if answer is None:
        return Reply(202)
    error = answer.get("error", {})
    status = 400 if error.get("code") in (PARSE_ERROR, INVALID_REQUEST) else 200
    if isinstance(error.get("data"), dict) and error["data"].get("error") == INSUFFICIENT_SCOPE:
        status = 403  # as the modern era answers it (ProtocolError.status); a batch stays 200
    return Reply(status, answer)


# --- 2025-03-26 … 2025-11-25 ------------------------------------------------------------------


def respond_batch(messages: list[Any], tools: Tools) -> Reply:
    if not messages:
        return Reply(400, error_object(INVALID_REQUEST, "An empty batch is not a request"))
    answers = []
    for message in messages:
        if isinstance(message, dict) and message.get("method") == "initialize":
            # 2025-03-26 lifecycle: "The initialize request MUST NOT be part of a JSON-RPC batch".
            answers.append(error_object(INVALID_REQUEST, "initialize must not be batched", None, message.get("id")))
            continue
        answer = legacy_message(message, HEADERLESS_VERSION, tools)
        if answer is not None:
            answers.append(answer)
    return Reply(200, answers) if answers else Reply(202)


def legacy_message(message: Any, version: str, tools: Tools) -> dict[str, Any] | None:
    """The response to one legacy message, or None for notifications and client responses."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error_object(INVALID_REQUEST, "Not a JSON-RPC 2.0 message", None, _id_or_none(message))
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return None  # a client's response: accepted and ignored (we never ask it anything)
        return error_object(INVALID_REQUEST, "Not a JSON-RPC 2.0 request", None, _id_or_none(message))
    method, params = message.get("method"), message.get("params", {})
    if not isinstance(method, str) or not isinstance(params, dict):
        return error_object(INVALID_REQUEST, "method must be a string and params an object", None,
                            _id_or_none(message))
    if "id" not in message:
        return None  # notifications (notifications/initialized, cancelled, …): 202
    request_id = message["id"]
    if not _valid_id(request_id):
        return error_object(INVALID_REQUEST, "id must be a string or an integer", None, None)
    if method in EVENTS_METHODS and serves_events(tools):
        return events_message(method, params, tools, request_id)
    try:
        if method == "initialize":
            result = initialize_result(params, tools)
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = tools_list_result(params, version, tools)
        elif method == "tools/call":
            result = tools_call_result(params, version, tools)
        elif method in RESOURCE_METHODS:
            result = resources_result(method, params, version, tools)
        else:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
    except ProtocolError as error:
        observe_call(method, params, tools, None)
        return error_object(error.code, error.message, error.data, request_id)
    declare_extensions(result, tools)
    observe_call(method, params, tools, result)
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


# Methods and tools outside these are counted as "other": a client cannot add label values.
RESOURCE_METHODS = frozenset({"resources/list", "resources/templates/list", "resources/read", "completion/complete"})
OBSERVED_METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "server/discover", *RESOURCE_METHODS})


def observe_call(method: str, params: Any, tools: Tools, result: dict[str, Any] | None) -> None:
    """`connect_mcp_calls` and the call's log fields (on the request's access line) per request
    answered; `result` None is a protocol error, a result with `isError` a tool's error."""
    tool = ""
    if method == "tools/call" and isinstance(params, dict):
        name = params.get("name")
        tool = name if isinstance(name, str) and tools.knows(name) else "other"
    is_error = result is None or bool(result.get("isError"))
    label = method if method in OBSERVED_METHODS else "other"
    metrics.MCP_CALLS.labels(label, tool, "true" if is_error else "false").inc()
    # The request's access line carries its call; a second call of a batch gets a line of its own.
    if not context.note_mcp_call(label, tool or None, is_error):
        logger.info("mcp %s %s", label, tool, extra={"mcp_method": label, "tool": tool or None, "is_error": is_error})


def _id_or_none(message: Any) -> Any:
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if _valid_id(request_id) else None


def initialize_result(params: dict[str, Any], tools: Tools) -> dict[str, Any]:
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise ProtocolError(INVALID_PARAMS, "initialize needs params.protocolVersion")
    # lifecycle.mdx "Version Negotiation": the requested version if supported, else our latest.
    version = requested if requested in LEGACY_VERSIONS else LATEST_LEGACY
    return {
        "protocolVersion": version,
        "capabilities": CAPABILITIES,
        "serverInfo": tools.server_info(version),
        "instructions": INSTRUCTIONS,
    }


def tools_list_result(params: dict[str, Any], version: str, tools: Tools) -> dict[str, Any]:
    if params.get("cursor") is not None:
        # Every tool fits on one page, so no cursor was ever handed out.
        raise ProtocolError(INVALID_PARAMS, "Invalid cursor: tools/list has a single page")
    return {"tools": tools.definitions(version)}


def tools_call_result(params: dict[str, Any], version: str, tools: Tools) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str):
        raise ProtocolError(INVALID_PARAMS, "tools/call needs params.name")
    if not tools.knows(name):
        # tools.mdx "Error Handling": an unknown tool is a protocol error, -32602.
        raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ProtocolError(INVALID_PARAMS, "params.arguments must be an object")
    return tools.call(name, arguments, version)


def resources_result(method: str, params: dict[str, Any], version: str, tools: Tools) -> dict[str, Any]:
    """resources/list, resources/templates/list, resources/read and completion/complete, in
    either era (the caching fields are added by the modern one)."""
    resources = tools.resources
    if method == "resources/templates/list":
        if params.get("cursor") is not None:
            raise ProtocolError(INVALID_PARAMS, "Invalid cursor: resources/templates/list has a single page")
        return {"resourceTemplates": resources.templates(version)}
    if method == "resources/list":
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise ProtocolError(INVALID_PARAMS, "params.cursor must be a string")
        return resources.list(cursor, version)
    if method == "resources/read":
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise ProtocolError(INVALID_PARAMS, "resources/read needs params.uri")
        return resources.read(uri, version)
    return resources.complete(params)


# --- 2026-07-28 -------------------------------------------------------------------------------


def respond_modern(headers: Mapping[str, str], message: Any, tools: Tools, duplicated: set[str]) -> Reply:
    if not isinstance(message, dict):
        return Reply(400, error_object(INVALID_REQUEST, "The body must be one JSON-RPC request or notification"))
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str) or (
        "params" in message and not isinstance(message["params"], dict)
    ):
        return Reply(400, error_object(INVALID_REQUEST, "Not a JSON-RPC 2.0 request", None, _id_or_none(message)))
    if "id" not in message:
        return Reply(202)  # this revision defines no client notifications over HTTP; accepted, dropped
    request_id = message["id"]
    if not _valid_id(request_id):
        return Reply(400, error_object(INVALID_REQUEST, "id must be a string or an integer"))
    meta = _meta_of(message)
    if meta is not None and "traceparent" in meta:
        context.note_traceparent(meta["traceparent"])  # W3C Trace Context, kept in the log context
    params = message.get("params", {})
    try:
        check_envelope(headers, message, duplicated)
        result = modern_result(message["method"], params, tools)
        declare_extensions(result, tools)
    except ProtocolError as error:
        observe_call(message["method"], params, tools, None)
        if error.code == UNSUPPORTED_PROTOCOL_VERSION:
            return unsupported_version(error.data, request_id)
        status = error.status or MODERN_ERROR_STATUS.get(error.code, 200)
        return Reply(status, error_object(error.code, error.message, error.data, request_id))
    observe_call(message["method"], params, tools, result)
    meta = result.setdefault("_meta", {})
    meta[META_SERVER_INFO] = tools.server_info(MODERN_VERSION)
    return Reply(200, {"jsonrpc": "2.0", "id": request_id, "result": {"resultType": "complete", **result}})


def check_envelope(headers: Mapping[str, str], message: dict[str, Any], duplicated: set[str]) -> None:
    """The per-request fields (basic/index.mdx "_meta"), then the mirrored headers
    (streamable-http.mdx "Server Validation"), then the version itself."""
    meta = _meta_of(message)
    missing = [key for key in (META_VERSION, META_CAPABILITIES) if meta is None or key not in meta]
    if missing:
        raise ProtocolError(INVALID_PARAMS, f"params._meta must carry {' and '.join(missing)}")
    assert meta is not None
    version = meta[META_VERSION]
    if duplicated:
        raise ProtocolError(HEADER_MISMATCH, f"Header mismatch: {sorted(duplicated)[0]} appears more than once")
    if headers.get("mcp-protocol-version") != version:
        raise ProtocolError(HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version does not match _meta")
    method = message["method"]
    if headers.get("mcp-method") != method:
        raise ProtocolError(HEADER_MISMATCH, f"Header mismatch: Mcp-Method does not match the body's method {method!r}")
    name_key = NAME_BEARING_METHODS.get(method)
    if name_key is not None:
        body_value = message.get("params", {}).get(name_key)
        if body_value is not None and decode_header_value(headers.get("mcp-name")) != body_value:
            raise ProtocolError(HEADER_MISMATCH, f"Header mismatch: Mcp-Name does not match params.{name_key}")
    if not isinstance(version, str):
        raise ProtocolError(INVALID_PARAMS, f"{META_VERSION} must be a string")
    if version != MODERN_VERSION:
        raise ProtocolError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", version)
    if not isinstance(meta[META_CAPABILITIES], dict):
        raise ProtocolError(INVALID_PARAMS, f"{META_CAPABILITIES} must be an object")


def modern_result(method: str, params: dict[str, Any], tools: Tools) -> dict[str, Any]:
    if method in EVENTS_METHODS and serves_events(tools):
        return events_result(method, params, tools)
    if method == "server/discover":
        return {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": CAPABILITIES,
            "instructions": INSTRUCTIONS,
            "ttlMs": LIST_TTL_MS,
            "cacheScope": "public",
        }
    if method == "tools/list":
        return {**tools_list_result(params, MODERN_VERSION, tools), "ttlMs": LIST_TTL_MS, "cacheScope": "public"}
    if method == "tools/call":
        return tools_call_result(params, MODERN_VERSION, tools)
    if method == "resources/templates/list":
        result = resources_result(method, params, MODERN_VERSION, tools)
        return {**result, "ttlMs": LIST_TTL_MS, "cacheScope": "public"}
    if method in ("resources/list", "resources/read"):
        result = resources_result(method, params, MODERN_VERSION, tools)
        return {**result, "ttlMs": RESOURCE_TTL_MS, "cacheScope": "private"}
    if method == "completion/complete":
        return resources_result(method, params, MODERN_VERSION, tools)
    # initialize, ping, logging/setLevel … are gone in this revision (changelog.mdx).
    raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")


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



# --- Extensions (SEP-2133 "Extension Negotiation") ----------------------------------------------
# The MCP Events extension: its methods answer in both eras, and initialize and server/discover
# declare it under `capabilities.extensions`, when the registry carries the caller's principal
# (apps/mcp/tools.WorkspaceTools: the log is read as that principal may read it). Its reads are
# Django's, so apps/mcp/events_extension.py is imported when first called.
EVENTS_EXTENSION = "io.modelcontextprotocol/events"
EVENTS_SETTINGS = {"listChanged": False}  # the catalog changes only with a deploy
EVENTS_METHODS = frozenset({"events/list", "events/poll", "events/stream", "events/subscribe", "events/unsubscribe"})
EVENTS_FORBIDDEN = -32012  # the extension's Forbidden: a type the credential's scopes do not allow
MODERN_ERROR_STATUS[EVENTS_FORBIDDEN] = 403  # as REST and the stream answer insufficient_scope


def serves_events(tools: Tools) -> bool:
    return hasattr(tools, "principal")


def declare_extensions(result: dict[str, Any], tools: Tools) -> None:
    if "capabilities" in result and serves_events(tools):  # a copy: the capabilities may be a shared constant
        result["capabilities"] = {**result["capabilities"], "extensions": {EVENTS_EXTENSION: EVENTS_SETTINGS}}


def events_result(method: str, params: dict[str, Any], tools: Tools) -> dict[str, Any]:
    from apps.mcp import events_extension

    try:
        return events_extension.answer(method, params, tools.principal)  # type: ignore[attr-defined]
    except events_extension.EventsError as error:
        raise ProtocolError(error.code, error.message, error.data) from None


def events_message(method: str, params: dict[str, Any], tools: Tools, request_id: Any) -> dict[str, Any]:
    """A legacy request's answer, as legacy_message answers the core methods."""
    try:
        result = events_result(method, params, tools)
    except ProtocolError as error:
        observe_call(method, params, tools, None)
        return error_object(error.code, error.message, error.data, request_id)
    observe_call(method, params, tools, result)
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
