"""Event filters (docs/api/events-and-stream.md): validation, cost, scopes and matching.

A pure module — no Django, no I/O — so the stream, webhook subscriptions and unit tests all
use the same rules (webhook subscriptions match through `FilterEntry.matches`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import orjson

SESSION_CREATED = "session.created"
SESSION_STATUS_CHANGED = "session.status_changed"
TRANSCRIPT_SEGMENT_CREATED = "transcript.segment.created"

# Internal types: changes the contract has no public event for (a final revision written, a board
# version published, a session's fields edited). They are rows of the log like the others, so
# live resources (MCP `subscriptions/listen`) hear of them in log order and resume across them,
# but no public reader shows one: they are in no TYPE_SCOPES, so no stream filter, REST `type`,
# webhook filter or events-extension name can ask for them (docs/decisions/internal-events.md).
TRANSCRIPT_REVISION_REPLACED = "transcript.revision.replaced"
BOARD_VERSION_CREATED = "board.version.created"
SESSION_UPDATED = "session.updated"
INTERNAL_TYPES = frozenset({TRANSCRIPT_REVISION_REPLACED, BOARD_VERSION_CREATED, SESSION_UPDATED})

# Which scope lets a credential receive each event type (docs/api/events-and-stream.md).
TYPE_SCOPES: dict[str, str] = {
    SESSION_CREATED: "svc:sessions:read",
    SESSION_STATUS_CHANGED: "svc:sessions:read",
    TRANSCRIPT_SEGMENT_CREATED: "svc:transcripts:read",
}
# Types that need a sessionId in their filter entry.
SESSION_BOUND_TYPES = frozenset({TRANSCRIPT_SEGMENT_CREATED})
# What a stream without `filters` receives, each still subject to its scope.
DEFAULT_TYPES = (SESSION_CREATED, SESSION_STATUS_CHANGED)

MIN_ENTRIES, MAX_ENTRIES = 1, 20
ENTRY_COST = 10
# The budget is the current one: it can change, so clients read it from the error body.
COST_BUDGET = 100


class InvalidFilters(ValueError):
    """`400 invalid_filters` (stream) or `invalid_request` (webhooks): not JSON, or not the
    filter schema. `detail` says where and why, e.g. `filters[2].sessionId: required for
    transcript.segment.created`, in our words: it never echoes a value the client sent."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"filters{where}: {why}")
        self.detail = f"filters{where}: {why}"


class FilterCostExceeded(ValueError):
    """`400 filter_cost_exceeded`, with the body's extra fields."""

    def __init__(self, cost: int, budget: int, entries: list[dict[str, Any]]) -> None:
        super().__init__(f"filter cost {cost} exceeds budget {budget}")
        self.cost, self.budget, self.entries = cost, budget, entries

    def body_fields(self) -> dict[str, Any]:
        return {"cost": self.cost, "budget": self.budget, "entries": self.entries}


class MissingScope(ValueError):
    """`403 insufficient_scope`: an entry subscribes to a type the credential may not receive.
    `scopes`: every scope the whole subscription needs."""

    def __init__(self, scopes: list[str]) -> None:
        super().__init__(" ".join(scopes))
        self.scopes = scopes


def needed_scopes(types: Iterable[str]) -> list[str]:
    """The scopes receiving `types` needs, once each, in the order of `TYPE_SCOPES`."""
    wanted = set(types)
    return list(dict.fromkeys(scope for type, scope in TYPE_SCOPES.items() if type in wanted))


@dataclass(frozen=True)
class FilterEntry:
    type: str
    session_id: str | None = None

    def matches(self, type: str, session_id: str) -> bool:
        return self.type == type and (self.session_id is None or self.session_id == session_id)

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type} if self.session_id is None else {"type": self.type, "sessionId": self.session_id}


def parse_entries(value: Any) -> list[FilterEntry]:
    """Validate an already-decoded JSON value against the filter-array schema."""
    if not isinstance(value, list) or not MIN_ENTRIES <= len(value) <= MAX_ENTRIES:
        raise InvalidFilters("", f"must be an array of {MIN_ENTRIES} to {MAX_ENTRIES} entries")
    entries = []
    for index, item in enumerate(value):
        at = f"[{index}]"
        if not isinstance(item, dict):
            raise InvalidFilters(at, "must be an object")
        if not set(item) <= {"type", "sessionId"}:
            raise InvalidFilters(at, "unknown property; an entry has only type and sessionId")
        type_ = item.get("type")
        if not isinstance(type_, str) or type_ not in TYPE_SCOPES:
            raise InvalidFilters(f"{at}.type", "must be one of " + ", ".join(TYPE_SCOPES))
        session_id = item.get("sessionId")
        if "sessionId" in item and (not isinstance(session_id, str) or not session_id):
            raise InvalidFilters(f"{at}.sessionId", "must be a non-empty string")
        if type_ in SESSION_BOUND_TYPES and session_id is None:
            raise InvalidFilters(f"{at}.sessionId", f"required for {type_}")
        entries.append(FilterEntry(type=type_, session_id=session_id))
    return entries


def parse_filters(raw: str) -> list[FilterEntry]:
    """The `filters` query parameter, already URL-decoded, as entries."""
    try:
        # orjson, not json: it refuses a "\ud800" escape (a lone surrogate is not text, and the
        # cost error's body could not echo it) and nesting past 1,024 levels.
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidFilters("", "not JSON") from None
    return parse_entries(value)


def entry_cost(entry: FilterEntry) -> int:  # noqa: ARG001 - flat today; the budget "can change"
    return ENTRY_COST


def check_cost(entries: Iterable[FilterEntry], budget: int = COST_BUDGET) -> int:
    entries = list(entries)
    costs = [entry_cost(e) for e in entries]
    total = sum(costs)
    if total > budget:
        raise FilterCostExceeded(total, budget, [{**e.as_dict(), "cost": c} for e, c in zip(entries, costs)])
    return total


def check_scopes(entries: Iterable[FilterEntry], scopes: frozenset[str] | set[str]) -> None:
    entries = list(entries)
    if any(TYPE_SCOPES[entry.type] not in scopes for entry in entries):
        raise MissingScope(needed_scopes(entry.type for entry in entries))


@dataclass(frozen=True)
class Subscription:
    """What one stream receives: explicit entries (OR-matched), or, without filters, the
    default types its scopes allow (possibly none: the stream then carries only pings)."""

    entries: tuple[FilterEntry, ...] = ()
    default_types: frozenset[str] = frozenset()

    def matches(self, type: str, session_id: str) -> bool:
        if self.entries:
            return matches(self.entries, type, session_id)
        return type in self.default_types

    def routes(self) -> frozenset[tuple[str, str | None]]:
        """The (type, sessionId-or-None) keys this subscription matches exactly: an event
        (type, s) matches it if and only if (type, None) or (type, s) is among them. The event
        hub indexes streams by these, so an event finds its streams with two lookups instead of
        asking every stream of the workspace."""
        if self.entries:
            return frozenset((entry.type, entry.session_id) for entry in self.entries)
        return frozenset((type, None) for type in self.default_types)


def matches(entries: Iterable[FilterEntry], type: str, session_id: str) -> bool:
    return any(entry.matches(type, session_id) for entry in entries)


def subscription_for(raw_filters: str | None, scopes: frozenset[str] | set[str]) -> Subscription:
    """Everything a stream request's `filters` decides, in the order errors are reported:
    invalid_filters, then filter_cost_exceeded, then insufficient_scope."""
    if raw_filters is None:
        return Subscription(default_types=frozenset(t for t in DEFAULT_TYPES if TYPE_SCOPES[t] in scopes))
    entries = parse_filters(raw_filters)
    check_cost(entries)
    check_scopes(entries, scopes)
    return Subscription(entries=tuple(entries))
