"""Resources: sessions, transcripts and boards by URI, for hosts that attach context.

`connect://sessions/{sessionId}` (the session), `…/transcript{?format,from,to}` (the flat
transcript), `…/transcripts/{revisionKind}{?format,from,to}` (one revision), `…/boards/{boardSpecId}`
(the current version) and `…/boards/{boardSpecId}/versions/{version}`. Each read is REST's answer
(the same selectors and representations) and needs the scope REST's read needs; a session of
another workspace reads as not found. A read larger than the result budget comes in pages: the
content's `_meta` says what this page holds and gives `nextUri`, the same URI with a `cursor`.
Transcript pages are whole JSON documents (runs of segments) or whole lines; a session or a
board too large for one result is cut as text, to be joined in order.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import orjson

from apps.access.principal import Principal
from apps.core.cursors import decode_cursor, encode_cursor
from apps.core.errors import InvalidRequest, NotFound
from apps.mcp import budget, selectors, transcripts
from apps.mcp.discovery import ICON_VERSIONS, icons
from apps.mcp.protocol import INSUFFICIENT_SCOPE, INVALID_PARAMS, INVALID_REQUEST, ProtocolError, resource_not_found
from apps.recordings import selectors as recordings
from apps.recordings.models import RevisionKind
from apps.recordings.representations import board_repr, session_row_repr

SCHEME = "connect"
JSON_MIME = "application/json"
SESSIONS_READ, TRANSCRIPTS_READ, BOARDS_READ = "svc:sessions:read", "svc:transcripts:read", "svc:boards:read"
LIST_PAGE = 50  # sessions per resources/list page, fewer when they do not fit the budget
COMPLETION_MAX = 100  # completion.mdx: at most 100 values
WINDOW = "{?format,from,to}"

TEMPLATES: tuple[dict[str, Any], ...] = (
    {"uriTemplate": "connect://sessions/{sessionId}", "name": "session", "title": "Session",
     "description": "A session's metadata as REST's GET /api/v1/sessions/{id} returns it (needs svc:sessions:read).",
     "mimeType": JSON_MIME},
    {"uriTemplate": "connect://sessions/{sessionId}/transcript" + WINDOW, "name": "transcript",
     "title": "Transcript",
     "description": "The session's transcript (final revision, else the live one). format=json (default, REST's "
                    "body, application/json) or text (one line per segment, text/plain); from/to keep the segments "
                    "starting in that window (ms from the session start). Needs svc:transcripts:read."},
    {"uriTemplate": "connect://sessions/{sessionId}/transcripts/{revisionKind}" + WINDOW,
     "name": "transcript-revision", "title": "Transcript revision",
     "description": "One revision of the transcript: revisionKind committed (live) or final; REST's "
                    "/transcripts?revisionKind= body. format, from and to as for the transcript."},
    {"uriTemplate": "connect://sessions/{sessionId}/boards/{boardSpecId}", "name": "board", "title": "Board",
     "description": "The current version of one AI board, as REST's GET …/boards/{boardSpecId} (needs "
                    "svc:boards:read).", "mimeType": JSON_MIME},
    {"uriTemplate": "connect://sessions/{sessionId}/boards/{boardSpecId}/versions/{version}",
     "name": "board-version", "title": "Board version",
     "description": "One given version of a board, current or not.", "mimeType": JSON_MIME},
)  # fmt: skip


def _variables(template: str) -> list[str]:
    """The template's variable names (RFC 6570 expressions, `{a}` and `{?a,b}`)."""
    return [name for expression in re.findall(r"\{([^}]*)\}", template) for name in expression.lstrip("?&").split(",")]


TEMPLATE_ARGUMENTS = {template["uriTemplate"]: _variables(template["uriTemplate"]) for template in TEMPLATES}


def session_uri(session_id: str) -> str:
    return f"{SCHEME}://sessions/{quote(session_id, safe='')}"


def board_uri(session_id: str, board_id: str, version: int | None = None) -> str:
    uri = f"{session_uri(session_id)}/boards/{quote(board_id, safe='')}"
    return uri if version is None else f"{uri}/versions/{version}"


def fit_session(item: dict[str, Any], what: str) -> tuple[dict[str, Any], str | None]:
    """A session as it fits one result: whole, or with its memo cut and a note saying so (only a
    memo is unbounded)."""
    if budget.size(item) <= budget.room():
        return item, None
    memo = item.get("memo") or ""
    cut = budget.cut_field(item, "memo", budget.room())
    note = (f"{what} of session {item['id']} was cut at {len(cut['memo'])} of {len(memo)} characters to fit one "
            f"result; read the resource {session_uri(item['id'])} (in pages) or GET /api/v1/sessions/{item['id']} "
            "for it whole.")
    return cut, note


@dataclass(frozen=True)
class Target:
    """A parsed resource URI."""

    kind: str  # session, transcript, board
    session_id: str
    revision_kind: str | None = None
    board_id: str | None = None
    version: int | None = None
    params: dict[str, str] = field(default_factory=dict)
    base: str = ""  # the URI without its cursor

    @property
    def scope(self) -> str:
        return {"session": SESSIONS_READ, "transcript": TRANSCRIPTS_READ, "board": BOARDS_READ}[self.kind]


def parse(uri: str, version: str) -> Target:
    """The resource `uri` names; not found for anything that is not one of ours."""
    missing = resource_not_found(version, uri)
    try:
        parts = urlsplit(uri)
    except ValueError:
        raise missing from None
    if parts.scheme != SCHEME or parts.netloc != "sessions" or parts.fragment:
        raise missing
    path = [unquote(p) for p in parts.path.split("/")[1:]]
    if not path or not all(path):
        raise missing
    params: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in params:
            raise ProtocolError(INVALID_PARAMS, f"{name} is given twice in the URI", {"uri": uri})
        params[name] = value
    base = uri.split("?", 1)[0]
    rest = {k: v for k, v in params.items() if k != "cursor"}
    if rest:
        base += "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in rest.items())
    session_id, tail = path[0], path[1:]
    if tail == []:
        target = Target("session", session_id, params=params, base=base)
    elif tail == ["transcript"]:
        target = Target("transcript", session_id, params=params, base=base)
    elif len(tail) == 2 and tail[0] == "transcripts":
        if tail[1] not in RevisionKind.values:
            raise missing
        target = Target("transcript", session_id, revision_kind=tail[1], params=params, base=base)
    elif len(tail) == 2 and tail[0] == "boards":
        target = Target("board", session_id, board_id=tail[1], params=params, base=base)
    elif len(tail) == 4 and tail[0] == "boards" and tail[2] == "versions":
        if not tail[3].isdigit() or len(tail[3]) > 9:
            raise missing
        target = Target("board", session_id, board_id=tail[1], version=int(tail[3]), params=params, base=base)
    else:
        raise missing
    allowed = {"cursor", "format", "from", "to"} if target.kind == "transcript" else {"cursor"}
    for name in sorted(set(params) - allowed):
        raise ProtocolError(INVALID_PARAMS, f"{name} is not a parameter of this resource", {"uri": uri})
    return target


def _window_value(target: Target, name: str, uri: str) -> int | None:
    value = target.params.get(name)
    if value is None:
        return None
    if not value.isdigit() or int(value) > 2**31 - 1:
        raise ProtocolError(INVALID_PARAMS, f"{name} must be milliseconds, an integer from 0 to {2**31 - 1}",
                            {"uri": uri})
    return int(value)


def _continuation(base: str, cursor: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}cursor={quote(cursor, safe='')}"


@dataclass(frozen=True)
class WorkspaceResources:
    """The resources one principal can read (apps.mcp.protocol.Resources)."""

    principal: Principal

    def templates(self, version: str) -> list[dict[str, Any]]:
        if version not in ICON_VERSIONS:
            return [dict(t) for t in TEMPLATES]
        return [{**t, "icons": icons()} for t in TEMPLATES]

    def list(self, cursor: str | None, version: str) -> dict[str, Any]:
        """The workspace's sessions, newest first, a page at a time (REST's keyset cursor): the
        set REST's list shows to this credential, so none without svc:sessions:read."""
        if not self.principal.has_scope(SESSIONS_READ):
            if cursor is not None:
                raise ProtocolError(INVALID_PARAMS, "Invalid cursor: this list has a single, empty page")
            return {"resources": []}
        limit = LIST_PAGE
        while True:
            try:
                rows, next_cursor = recordings.sessions_page(workspace=self.principal.workspace, limit=limit,
                                                             cursor=cursor)
            except InvalidRequest:
                raise ProtocolError(INVALID_PARAMS, "Invalid cursor: start again without one") from None
            items = [self._listed(row) for row in rows]
            fit = budget.fitting(map(budget.size, items), budget.room())
            if fit >= len(items) or limit == 1:
                break
            limit = max(fit, 1)
        result: dict[str, Any] = {"resources": items}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return result

    @staticmethod
    def _listed(row: Any) -> dict[str, Any]:
        session = session_row_repr(row)
        label = (session["label"] or session["id"])[:200]
        return {
            "uri": session_uri(session["id"]),
            "name": session["id"],
            "title": label,
            "description": f"Session {label!r}, {session['status']}, created {session['createdAt']}. Its transcript: "
                           f"{session_uri(session['id'])}/transcript",
            "mimeType": JSON_MIME,
            "annotations": {"lastModified": session["updatedAt"]},
        }

    def read(self, uri: str, version: str) -> dict[str, Any]:
        target = parse(uri, version)
        if not self.principal.has_scope(target.scope):
            raise ProtocolError(INVALID_REQUEST, f"Insufficient scope: reading this resource needs {target.scope}",
                                {"error": INSUFFICIENT_SCOPE, "scope": target.scope}, status=403)
        try:
            if target.kind == "transcript":
                return self._transcript(target, uri)
            return self._document(target, uri)
        except NotFound:
            raise resource_not_found(version, uri) from None

    def _transcript(self, target: Target, uri: str) -> dict[str, Any]:
        fmt = target.params.get("format", "json")
        if fmt not in transcripts.FORMATS:
            raise ProtocolError(INVALID_PARAMS, "format must be json or text", {"uri": uri})
        query = transcripts.Query(target.session_id, target.revision_kind, fmt, _window_value(target, "from", uri),
                                  _window_value(target, "to", uri))
        if query.start_ms is not None and query.end_ms is not None and query.end_ms <= query.start_ms:
            raise ProtocolError(INVALID_PARAMS, "to must be after from", {"uri": uri})
        try:
            page = transcripts.read(self.principal.workspace, query, target.params.get("cursor"))
        except transcripts.TranscriptCursorError as error:
            raise ProtocolError(INVALID_PARAMS, f"cursor {error.extra.get('detail', '')}".strip(),
                                {"uri": uri}) from None
        content: dict[str, Any] = {"uri": uri, "mimeType": page.mime_type, "text": page.content()}
        if page.next_cursor is not None:
            next_uri = _continuation(target.base, page.next_cursor)
            content["_meta"] = {
                "note": f"{page.describe(query)} This is not the whole transcript: read {next_uri} for the rest.",
                "nextUri": next_uri,
                "totalSegments": page.total,
            }
        elif page.cut:
            content["_meta"] = {"note": page.describe(query), "totalSegments": page.total}
        return {"contents": [content]}

    def _document(self, target: Target, uri: str) -> dict[str, Any]:
        """A session or a board: REST's JSON whole when it fits, else in text slices."""
        workspace = self.principal.workspace
        if target.kind == "session":
            row = recordings.session_row(workspace=workspace, session_id=target.session_id)
            body: dict[str, Any] = {"session": session_row_repr(row)}
        elif target.version is None:
            body = {"board": board_repr(recordings.current_board(workspace=workspace, session_id=target.session_id,
                                                                 board_id=target.board_id))}
        else:
            body = {"board": board_repr(selectors.board_version(workspace=workspace, session_id=target.session_id,
                                                                board_id=target.board_id, version=target.version))}
        text = orjson.dumps(body).decode()
        cursor = target.params.get("cursor")
        if cursor is None and len(text.encode()) <= budget.room():
            return {"contents": [{"uri": uri, "mimeType": JSON_MIME, "text": text}]}
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        start = 0
        if cursor is not None:
            try:
                cursor_base, cursor_digest, start = decode_cursor("mcp-text", workspace.id, cursor)
            except (InvalidRequest, ValueError, TypeError):
                raise ProtocolError(INVALID_PARAMS, "cursor is not one this resource handed out",
                                    {"uri": uri}) from None
            if cursor_base != target.base or not isinstance(start, int) or not 0 <= start < len(text):
                raise ProtocolError(INVALID_PARAMS, "cursor is not one this resource handed out", {"uri": uri})
            if cursor_digest != digest:
                raise ProtocolError(INVALID_PARAMS, "the resource changed since this cursor was issued; read it "
                                    "again from the start", {"uri": uri})
        end = budget.text_slice(text, start, budget.room())
        meta: dict[str, Any] = {"totalCharacters": len(text), "from": start, "to": end}
        if end < len(text):
            next_uri = _continuation(target.base, encode_cursor("mcp-text", workspace.id, [target.base, digest, end]))
            meta["note"] = (f"Characters {start}-{end} of {len(text)} of this JSON document, too large for one "
                            f"result: read {next_uri} for the rest, and join the texts in order.")
            meta["nextUri"] = next_uri
        else:
            meta["note"] = f"The last characters ({start}-{end}) of {len(text)}: join the texts read so far in order."
        return {"contents": [{"uri": uri, "mimeType": JSON_MIME, "text": text[start:end], "_meta": meta}]}

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        """Suggestions for a template's argument: session ids (by label or id prefix, newest
        first), board ids and versions of the session named in `context`, and the fixed choices."""
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise ProtocolError(INVALID_PARAMS, "completion/complete needs params.ref and params.argument")
        if ref.get("type") != "ref/resource":
            raise ProtocolError(INVALID_PARAMS, "Only resource templates (ref/resource) have completions here")
        names = TEMPLATE_ARGUMENTS.get(ref.get("uri"))
        if names is None:
            raise ProtocolError(INVALID_PARAMS, "ref.uri is not one of this server's resource templates")
        name, value = argument.get("name"), argument.get("value", "")
        if name not in names or not isinstance(value, str):
            raise ProtocolError(INVALID_PARAMS, f"argument.name must be one of {', '.join(names)}")
        context = params.get("context") or {}
        given = context.get("arguments") if isinstance(context, dict) else None
        given = given if isinstance(given, dict) else {}
        workspace = self.principal.workspace
        values: list[str] = []
        total = 0
        if name == "sessionId":
            if self.principal.has_scope(SESSIONS_READ):
                values, total = selectors.session_ids_by_prefix(workspace=workspace, prefix=value, limit=COMPLETION_MAX)
        elif name in ("boardSpecId", "version") and isinstance(given.get("sessionId"), str):
            if self.principal.has_scope(BOARDS_READ):
                if name == "boardSpecId":
                    found = selectors.board_ids(workspace=workspace, session_id=given["sessionId"])
                elif isinstance(given.get("boardSpecId"), str):
                    found = [str(v) for v in selectors.board_versions(
                        workspace=workspace, session_id=given["sessionId"], board_id=given["boardSpecId"])]
                else:
                    found = []
                values = [v for v in found if v.startswith(value)]
        elif name in ("revisionKind", "format"):
            choices = list(RevisionKind.values) if name == "revisionKind" else list(transcripts.FORMATS)
            values = [c for c in choices if c.startswith(value)]
        total = max(total, len(values))
        values = values[:COMPLETION_MAX]
        return {"completion": {"values": values, "total": total, "hasMore": total > len(values)}}
