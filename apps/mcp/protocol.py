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

import logging
from collections.abc import Mapping
from typing import Any

import orjson

from apps.core import context, metrics
from apps.mcp.wire import (  # noqa: F401 - the wire's names, as callers have always found them here
    BATCH_VERSIONS,
    CAPABILITIES,
    HEADERLESS_VERSION,
    HEADER_MISMATCH,
    INSTRUCTIONS,
    INSUFFICIENT_SCOPE,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_LEGACY,
    LEGACY_RESOURCE_NOT_FOUND,
    LEGACY_VERSIONS,
    LIST_TTL_MS,
    META_CAPABILITIES,
    META_SERVER_INFO,
    META_VERSION,
    METHOD_NOT_FOUND,
    MODERN_CAPABILITIES,
    MODERN_ERROR_STATUS,
    MODERN_VERSION,
    NAME_BEARING_METHODS,
    PARSE_ERROR,
    ProtocolError,
    RESOURCE_TTL_MS,
    ROUTING_HEADERS,
    Reply,
    Resources,
    SERVER_INFO,
    STRUCTURED_OUTPUT_VERSIONS,
    SUPPORTED_VERSIONS,
    Tools,
    UNSUPPORTED_PROTOCOL_VERSION,
    _B64_SENTINEL,
    _meta_of,
    _valid_id,
    declares_modern,
    decode_header_value,
    error_object,
    resource_not_found,
    routing_headers,
    unsupported_version,
)

logger = logging.getLogger("connect.mcp")


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
        elif method in SUBSCRIBE_METHODS:
            raise ProtocolError(METHOD_NOT_FOUND, f"{method} is not offered: this server keeps no session to hold a "
                                "subscription (capabilities.resources.subscribe is false); on 2026-07-28, "
                                "subscriptions/listen streams resource updates")
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
SUBSCRIBE_METHODS = frozenset({"resources/subscribe", "resources/unsubscribe"})
STREAMING_METHODS = frozenset({"subscriptions/listen", "events/stream"})  # answered by apps/mcp/streaming.py
OBSERVED_METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "server/discover", *RESOURCE_METHODS,
                              *STREAMING_METHODS})


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
            "capabilities": MODERN_CAPABILITIES,
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
    if method in SUBSCRIBE_METHODS:
        raise ProtocolError(METHOD_NOT_FOUND, f"{method} was removed in 2026-07-28: use subscriptions/listen")
    # initialize, ping, logging/setLevel … are gone in this revision (changelog.mdx).
    raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")


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
