"""OpenAPI plumbing shared by every app: the error bodies and the postprocessing hook.

Error bodies: every wire code of apps/core/errors.py has one schema component (`NotFoundError`
for `not_found`, …; `filter_cost_exceeded` is the event stream's `FilterCostExceeded`), and
`Error` is exactly one of them, so an error response that refers to `Error` refers to every code
once. A 400 code's component requires `detail` (which parameter or field, and why), as do
`unauthorized`, `insufficient_scope` and `resync_required` (what to do). Each error response
shows examples of its own codes (`document_error_examples`), not `Error`'s first branch.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from apps.core import errors, shapes

ERROR_DESCRIPTIONS = {
    400: "`invalid_request`: query parameters or request shape fail validation; `detail` says which parameter "
    "or field and why, e.g. `limit: must be an integer from 1 to 100`",
    401: "`unauthorized`: Bearer credential missing, invalid, expired, of another audience or without a workspace; "
    "`detail` says whether the header is missing, is not a Bearer credential, or holds a credential that is not "
    "valid (never which kind, nor any part of it), and `WWW-Authenticate` is the RFC 6750 challenge",
    403: "`insufficient_scope` (a scope missing: `requiredScopes` and the challenge's `scope` name what this "
    "request needs) or `forbidden` (issuer no longer an active member)",
    404: "`not_found`, or `workspace_not_found` when the credential's workspace cannot be resolved",
    405: "`method_not_allowed`",
    409: "`not_allowed`: not allowed in the resource's present state; the operation's description says when",
    410: "`resync_required`: `after` is older than the event log's retention for the requested types; re-read "
    "the resources, then read the log again without `after` and follow `nextCursor` (`detail` says so)",
    422: "`idempotency_key_reused`: the `Idempotency-Key` came with a different request before",
    413: "`payload_too_large`: the request body is over the upload limit (`DATA_UPLOAD_MAX_MEMORY_SIZE`)",
    429: "`rate_limited`: the credential's or the workspace's request limit for this window is spent "
    "(see `Retry-After`)",
    500: "`internal_server_error`",
    503: "`unavailable`: a dependency (the database, Redis) cannot be reached or the server is saturated; retry "
    "after `Retry-After` seconds; or `timeout`: the request's database work took longer than the per-request limit",
}


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="Machine-readable error code")


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error rows of an operation: the given ones plus those every operation can return
    (413 is added to every operation that can carry a body, in `document_payload_limit`)."""
    codes = sorted({*statuses, 401, 403, 404, 429, 500, 503})
    return {code: OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code]) for code in codes}


# Paths added by apps that are not DRF views (event stream, MCP, webhook requests) register
# a function here; each takes the schema and edits it in place.
SCHEMA_EXTENDERS: list[Any] = []


RATE_LIMIT_HEADERS = {
    "RateLimit-Limit": "Requests allowed in the current window (the tighter of the credential's and the workspace's)",
    "RateLimit-Remaining": "Requests left in the current window",
    "RateLimit-Reset": "Seconds until the current window ends",
}


def document_rate_limits(result: dict[str, Any]) -> None:
    """Every operation that takes a Bearer credential is rate limited (apps/access/ratelimit/):
    it can answer 429, and its responses but 401 carry the RateLimit headers (401 and the
    credential's own 403 `forbidden` / 404 `workspace_not_found` come before counting, so those
    carry none); a 429 also Retry-After."""
    components = result.setdefault("components", {})
    headers = components.setdefault("headers", {})
    for name, description in RATE_LIMIT_HEADERS.items():
        headers[name] = {"description": description, "schema": {"type": "integer", "minimum": 0}}
    headers["Retry-After"] = {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}
    components.setdefault("schemas", {}).setdefault(
        "Error", {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
    )
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict) or not any("bearerAuth" in s for s in operation.get("security", [])):
                continue
            responses = operation.setdefault("responses", {})
            responses.setdefault(
                "429",
                {
                    "description": ERROR_DESCRIPTIONS[429],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
            )
            for status, response in responses.items():
                if status == "401":
                    continue  # no credential, nothing counted: a 401 carries no RateLimit headers
                refs = {name: {"$ref": f"#/components/headers/{name}"} for name in RATE_LIMIT_HEADERS}
                if status == "429":
                    refs["Retry-After"] = {"$ref": "#/components/headers/Retry-After"}
                response.setdefault("headers", {}).update(refs)


# --- Error codes -------------------------------------------------------------------------------

# Codes that have no class of their own in apps/core/errors.py (DRF's, and the last resort).
_UNCLASSED_CODES = {
    "internal_server_error": (500, "InternalServerError", "unexpected server error; never a detail"),
    "unsupported_media_type": (415, "UnsupportedMediaTypeError", "the request's Content-Type is not accepted"),
    "not_acceptable": (406, "NotAcceptableError", "no acceptable response format"),
}
DETAIL = {"type": "string", "description": "which parameter or field, and why, e.g. `cursor: not a cursor this "
          "service issued`; never the value that was sent"}


# Codes beside the 400s whose body always says what was wrong and what to do.
DETAILED_CODES = {
    "conflict": DETAIL,
    "idempotency_key_reused": DETAIL,
    "unauthorized": {"type": "string", "description": "whether the Authorization header is missing, is not a "
                     "Bearer credential, or holds one that is invalid, expired or revoked (never which, never any "
                     "part of it), and what to send"},
    "insufficient_scope": {"type": "string", "description": "the scopes this request needs and how to get them"},
    "resync_required": {"type": "string", "description": "what to re-read, and how to read the log again"},
}
REQUIRED_SCOPES = {"type": "array", "items": {"type": "string"}, "description": "every scope this request needs "
                   "(granted or not), as in the `scope` of the `WWW-Authenticate` challenge; absent only when an "
                   "ingest key is refused at an operation that declares no scope"}


def wire_codes() -> dict[str, tuple[int, str, str]]:
    """code → (status, component name, meaning) for every error class in apps/core/errors.py."""
    codes = dict(_UNCLASSED_CODES)
    for cls in _subclasses(errors.ApiError):
        if cls.__module__ != errors.__name__:
            continue  # a specialisation elsewhere (InvalidCursor, MCP's ToolArgumentError) keeps its code
        name = cls.__name__ if cls.__name__.endswith("Exceeded") else f"{cls.__name__}Error"
        codes[cls.code] = (cls.status, name, " ".join((cls.__doc__ or "").split("\n\n")[0].split()))
    return codes


def _subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))]


def document_error_codes(result: dict[str, Any]) -> None:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    refs = []
    for code, (status, name, meaning) in sorted(wire_codes().items(), key=lambda item: (item[1][0], item[0])):
        refs.append({"$ref": f"#/components/schemas/{name}"})
        if name in schemas:  # FilterCostExceeded: the event stream documents its extra fields
            continue
        properties: dict[str, Any] = {"error": {"type": "string", "const": code}}
        if status == 400 or code in DETAILED_CODES:
            properties["detail"] = DETAILED_CODES.get(code, DETAIL)
        required = list(properties)
        if code == "insufficient_scope":
            properties["requiredScopes"] = REQUIRED_SCOPES
        description = f"`{code}` (HTTP {status})" + (f": {meaning}" if meaning else "")
        schemas[name] = {"type": "object", "description": description, "properties": properties,
                         "required": required}
    schemas["Error"] = {"description": "An error body: `{\"error\": code}`, with extra fields for some codes.",
                        "oneOf": refs}


def document_payload_limit(result: dict[str, Any]) -> None:
    """Every operation that can carry a body answers 413 past the upload limit
    (apps/core/middleware.UploadLimitMiddleware), except those that document their own 413.
    It is refused before authentication, so it carries no RateLimit headers."""
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method in ("post", "put", "patch", "delete") and isinstance(operation, dict):
                operation.setdefault("responses", {}).setdefault("413", {
                    "description": ERROR_DESCRIPTIONS[413],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PayloadTooLargeError"}}},
                })


# --- Error examples -----------------------------------------------------------------------------
# Swagger UI shows a response's `examples` (else one it makes from the schema: for `Error`, the
# first branch of its oneOf, whatever the status). Each error response gets the codes its own
# description names (every description here and in the apps' modules names its codes in
# backticks), each with a body as the service sends it, for this operation.

EXAMPLE_REQUEST_ID = "req_3f9a1c0d5e7b2a4c6d8e0f1a"
SCOPE = re.compile(r"svc:[a-z]+:[a-z]+")
CHALLENGE_HEADER = {
    "description": "The RFC 6750 challenge: `Bearer resource_metadata=\"{base_url}/.well-known/oauth-protected-"
    "resource\"`; after it, `error=\"invalid_token\"` when the request presented a credential that is not valid (on "
    "a 401), or `error=\"insufficient_scope\", scope=\"…\"` naming the scopes this request needs (on a 403 "
    "`insufficient_scope`)",
    "schema": {"type": "string"},
}


def error_codes_named(status: int, description: str, codes: dict[str, tuple[int, str, str]]) -> list[str]:
    """The wire codes of `status` that `description` names in backticks, in its order."""
    named = re.findall(r"`([a-z_]+)`", description)
    return [code for code in dict.fromkeys(named) if code in codes and codes[code][0] == status]


def operation_scopes(operation: dict[str, Any]) -> list[str]:
    """The scopes the operation's security names (the first requirement that names any: all of
    its scopes are needed), else those its description names."""
    for requirement in operation.get("security", []):
        for scopes in requirement.values():
            if scopes:
                return list(scopes)
    return list(dict.fromkeys(SCOPE.findall(operation.get("description") or "")))


def example_bodies(code: str, operation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(summary, body) of each example of `code` for `operation`."""
    def body(**fields: Any) -> dict[str, Any]:
        return {"error": code, **fields, "requestId": EXAMPLE_REQUEST_ID}

    if code == "unauthorized":
        said = {"missing": "no Authorization header", "not_bearer": "not a Bearer credential",
                "invalid": "invalid, expired or revoked credential"}
        details = errors.UNAUTHORIZED_DETAILS
        return [(f"{code}: {said[reason]}", body(detail=detail)) for reason, detail in details.items()]
    if code == "insufficient_scope":
        scopes = operation_scopes(operation)
        bearer_scopes = [s for r in operation.get("security", []) for s in r.get("bearerAuth", [])]
        if bearer_scopes:  # a door that takes one kind of key only: the ingest API
            return [(code, body(detail=errors.READ_CREDENTIAL_AT_INGEST, requiredScopes=bearer_scopes))]
        if scopes:
            return [(code, body(detail=errors.scope_detail(tuple(scopes)), requiredScopes=scopes))]
        return [(code, body(detail=errors.ingest_key_reads_nothing(())))]
    if code == "invalid_request":
        return [(code, body(detail=_invalid_request_detail(operation)))]
    if code == "resync_required":
        return [(code, body(detail=errors.RESYNC_DETAIL))]
    return [(code, body())]


def _invalid_request_detail(operation: dict[str, Any]) -> str:
    query = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"]
    if "limit" in query:
        return "limit: must be an integer from 1 to 100"
    if "requestBody" in operation:
        return "body: must be a JSON object"
    takes = f"the parameters are {', '.join(query)}" if query else "this operation takes no query parameters"
    return f"page: unknown query parameter; {takes}"


def _refers_to_error(schema: Any, names: set[str]) -> bool:
    text = repr(schema)
    return any(f"#/components/schemas/{name}'" in text for name in names)


def document_error_examples(result: dict[str, Any]) -> None:
    codes = wire_codes()
    names = {"Error", *(name for _, name, _ in codes.values())}
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for status, response in operation.get("responses", {}).items():
                if not status.isdigit() or int(status) < 400:
                    continue
                if status in ("401", "403") and operation.get("security"):
                    response.setdefault("headers", {}).setdefault("WWW-Authenticate", CHALLENGE_HEADER)
                media = response.get("content", {}).get("application/json")
                if media is None or "example" in media or "examples" in media:
                    continue
                if not _refers_to_error(media.get("schema"), names):
                    continue
                examples = {}
                for code in error_codes_named(int(status), response.get("description", ""), codes):
                    for summary, value in example_bodies(code, operation):
                        examples[summary.replace(" ", "_").replace(":", "").replace(",", "")] = {
                            "summary": summary, "value": value}
                if examples:
                    media["examples"] = examples


OPENAPI_PATH = "/openapi.json"


def document_itself(result: dict[str, Any]) -> None:
    """`GET /openapi.json` is part of the contract (§4.6): the document lists itself."""
    result.setdefault("paths", {})[OPENAPI_PATH] = {
        "get": {
            "operationId": "getOpenApiDocument",
            "summary": "This document: the machine-readable contract (OpenAPI 3.1)",
            "tags": ["metadata"],
            "security": [],
            "responses": {
                "200": {
                    "description": "the OpenAPI document",
                    "content": {"application/json": {"schema": {"type": "object", "required": ["openapi", "paths"]}}},
                },
            },
        }
    }


# `/docs` groups operations by resource, in this order; each operation's tag comes
# from its path (the first pattern that matches), so a new view is grouped without a decorator.
TAGS = [
    ("sessions", "Recording sessions: list (newest first, filters) and read", r"^/api/v1/sessions(/\{id\})?$"),
    ("transcripts", "A session's transcript: flat, or per revision (committed, final)",
     r"^/api/v1/sessions/\{id\}/transcripts?(/|$)"),
    ("search", "Full-text search over transcript segments", r"^/api/v1/transcripts/search"),
    ("boards", "AI-generated boards of a session", r"^/api/v1/sessions/\{sessionId\}/boards"),
    ("events", "The event stream (SSE) and the event log", r"^/api/v1/events"),
    ("webhooks", "Webhook endpoints, tests, recovery and the signing keys",
     r"^/api/v1/webhooks|^/\.well-known/webhook-signing-keys"),
    ("deliveries", "Webhook deliveries: history, attempts, replay", r"^/api/v1/webhook-deliveries"),
    ("mcp", "Model Context Protocol endpoint for AI agents", r"^/mcp"),
    ("ingest", "The write door for recorders: sessions by the producer's id, segments, status, the final "
     "revision and boards (an ingest key, scope `svc:ingest:write`)", r"^/api/v1/ingest/"),
    ("oauth", "OAuth 2.1 authorization server and protected-resource metadata",
     r"^/api/auth/|^/\.well-known/oauth-"),
    ("metadata", "This document", r"^/openapi\.json"),
]

# Component names as the wire and the docs call the bodies, instead of drf-spectacular's
# serializer-derived ones (`PatchedEndpointPatchInRequest`).
COMPONENT_NAMES = {
    "EndpointInRequest": "WebhookCreate",
    "PatchedEndpointPatchInRequest": "WebhookUpdate",
    "FilterEntryRequest": "WebhookFilterEntryInput",
    "RecoverInRequest": "WebhookRecover",
}


def group_by_resource(result: dict[str, Any]) -> None:
    for path, item in result.get("paths", {}).items():
        tag = next((name for name, _, pattern in TAGS if re.search(pattern, path)), None)
        for operation in item.values():
            if isinstance(operation, dict) and "responses" in operation and tag is not None:
                operation["tags"] = [tag]
    result["tags"] = [{"name": name, "description": description} for name, description, _ in TAGS]


def name_components(result: dict[str, Any]) -> None:
    schemas = result.get("components", {}).get("schemas", {})
    renamed = {old: new for old, new in COMPONENT_NAMES.items() if old in schemas}
    if not renamed:
        return
    for old, new in renamed.items():
        assert new not in schemas, f"component {new} already exists"
        schemas[new] = schemas.pop(old)
    refs = {f"#/components/schemas/{old}": f"#/components/schemas/{new}" for old, new in renamed.items()}

    def rewrite(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str) and node["$ref"] in refs:
                node["$ref"] = refs[node["$ref"]]
            for value in node.values():
                rewrite(value)
        elif isinstance(node, list):
            for value in node:
                rewrite(value)

    rewrite(result)


def postprocess(result: dict[str, Any], generator, request, public) -> dict[str, Any]:  # noqa: ARG001
    # The wire shapes' components (apps/core/shapes.py): views and extenders refer to them by name.
    result.setdefault("components", {}).setdefault("schemas", {}).update(shapes.components())
    for extend in SCHEMA_EXTENDERS:
        extend(result)
    document_itself(result)
    document_rate_limits(result)
    document_payload_limit(result)
    document_error_codes(result)
    document_error_examples(result)
    group_by_resource(result)
    name_components(result)
    return result
