"""apps/events/filters.py, the pure rules of the stream's `filters` (docs/api/events-and-stream.md, errors.md,
§8): what is `invalid_filters`, what costs more than the budget, which scope each type needs,
and how entries match. No Django, no database: the live tests check the same rules over HTTP."""

from __future__ import annotations

import json

import pytest

from apps.events import filters
from apps.events.filters import (
    FilterCostExceeded,
    FilterEntry,
    InvalidFilters,
    MissingScope,
    Subscription,
    check_cost,
    check_scopes,
    matches,
    parse_entries,
    parse_filters,
    subscription_for,
)

SESSIONS = "svc:sessions:read"
TRANSCRIPTS = "svc:transcripts:read"
BOTH = frozenset({SESSIONS, TRANSCRIPTS})
CREATED, CHANGED, SEGMENT = "session.created", "session.status_changed", "transcript.segment.created"


def raw(*entries) -> str:
    return json.dumps(list(entries))


# --- §2.7 / §7: invalid_filters ---------------------------------------------------------------

@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty string"),
        pytest.param("not json", id="not JSON"),
        pytest.param("[{\"type\": \"session.created\"}", id="truncated JSON"),
        pytest.param("%5B%7B%22type%22%3A%22session.created%22%7D%5D", id="still percent-encoded"),
        pytest.param("[" * 100_000 + "]" * 100_000, id="nested too deep for the parser"),
        pytest.param("{}", id="an object, not an array"),
        pytest.param('{"type": "session.created"}', id="one entry, not in an array"),
        pytest.param('"session.created"', id="a string"),
        pytest.param("null", id="null"),
        pytest.param("7", id="a number"),
        pytest.param("[]", id="0 entries"),
        pytest.param(raw(*[{"type": CREATED}] * 21), id="21 entries"),
        pytest.param(raw(*[{"type": SEGMENT, "sessionId": f"s{i}"} for i in range(21)]), id="21 distinct entries"),
        pytest.param(raw("session.created"), id="entry is a string"),
        pytest.param(raw(None), id="entry is null"),
        pytest.param(raw([{"type": CREATED}]), id="entry is an array"),
        pytest.param(raw({}), id="entry without type"),
        pytest.param(raw({"sessionId": "s1"}), id="sessionId without type"),
        pytest.param(raw({"type": "board.updated"}), id="type not streamable"),
        pytest.param(raw({"type": "session.deleted"}), id="unknown type"),
        pytest.param(raw({"type": "Session.Created"}), id="type is case-sensitive"),
        pytest.param(raw({"type": " session.created"}), id="type with a space"),
        pytest.param(raw({"type": "session.*"}), id="no wildcards"),
        pytest.param(raw({"type": None}), id="type null"),
        pytest.param(raw({"type": 1}), id="type a number"),
        pytest.param(raw({"type": [CREATED]}), id="type an array"),
        pytest.param(raw({"type": CREATED, "extra": 1}), id="unknown property"),
        pytest.param(raw({"type": CREATED, "status": ["completed"]}), id="webhook-only property status"),
        pytest.param(raw({"type": CREATED, "session_id": "s1"}), id="snake_case sessionId"),
        pytest.param(raw({"type": CREATED, "sessionId": ""}), id="sessionId empty"),
        pytest.param(raw({"type": CHANGED, "sessionId": None}), id="sessionId null"),
        pytest.param(raw({"type": CREATED, "sessionId": 7}), id="sessionId a number"),
        pytest.param(raw({"type": CREATED, "sessionId": ["s1"]}), id="sessionId an array"),
        pytest.param(raw({"type": CREATED, "sessionId": {"id": "s1"}}), id="sessionId an object"),
        pytest.param(raw({"type": CREATED, "sessionId": True}), id="sessionId a boolean"),
        pytest.param(raw({"type": SEGMENT}), id="transcript.segment.created without sessionId"),
        pytest.param(raw({"type": SEGMENT, "sessionId": None}), id="transcript.segment.created with null sessionId"),
        pytest.param(raw({"type": SEGMENT, "sessionId": ""}), id="transcript.segment.created with empty sessionId"),
        pytest.param('[{"type": "session.created", "sessionId": "\\ud800"}]', id="sessionId not Unicode text"),
        pytest.param(raw({"type": CREATED}, {"type": CREATED, "bad": 1}), id="one bad entry among good ones"),
        pytest.param(raw(*[{"type": CREATED}] * 19, {"type": SEGMENT}), id="bad last entry of twenty"),
    ],
)
def test_invalid_filters(value):
    with pytest.raises(InvalidFilters):
        parse_filters(value)
    # The stream decides the same way, before cost and scopes: a credential without any scope
    # still gets invalid_filters, never insufficient_scope or filter_cost_exceeded.
    with pytest.raises(InvalidFilters):
        subscription_for(value, frozenset())


def test_parse_entries_takes_the_decoded_value():
    assert parse_entries([{"type": CREATED}]) == [FilterEntry(CREATED)]
    for value in (None, "[]", {"type": CREATED}, (), [], [{"type": CREATED}] * 21):
        with pytest.raises(InvalidFilters):
            parse_entries(value)


@pytest.mark.parametrize("count", [1, 2, 10, 20])
def test_one_to_twenty_entries_are_valid(count):
    entries = parse_filters(raw(*[{"type": CHANGED}] * count))
    assert entries == [FilterEntry(CHANGED)] * count


def test_valid_entries_keep_type_and_session_id_in_order():
    entries = parse_filters(raw(
        {"type": CREATED},
        {"type": CHANGED, "sessionId": "ses_1"},
        {"type": SEGMENT, "sessionId": "ses_2"},
        {"sessionId": "ses_3", "type": CREATED},
    ))
    assert entries == [
        FilterEntry(CREATED),
        FilterEntry(CHANGED, "ses_1"),
        FilterEntry(SEGMENT, "ses_2"),
        FilterEntry(CREATED, "ses_3"),
    ]
    assert [e.as_dict() for e in entries] == [
        {"type": CREATED},
        {"type": CHANGED, "sessionId": "ses_1"},
        {"type": SEGMENT, "sessionId": "ses_2"},
        {"type": CREATED, "sessionId": "ses_3"},
    ]


def test_session_id_is_any_non_empty_string():
    # §2.7 says "string, minimum length 1" and nothing more: one character, spaces, non-ASCII.
    for session_id in ("x", " ", "ses_01hx", "séance-☃", "a" * 500):
        [entry] = parse_filters(raw({"type": SEGMENT, "sessionId": session_id}))
        assert entry == FilterEntry(SEGMENT, session_id)


def test_whitespace_around_the_json_is_allowed():
    assert parse_filters(' \n[ {"type" : "session.created"} ]\t') == [FilterEntry(CREATED)]


# --- §8: cost 10 per entry, budget 100 → filter_cost_exceeded ------------------------------

def test_cost_is_ten_per_entry_up_to_the_budget():
    assert filters.ENTRY_COST == 10 and filters.COST_BUDGET == 100
    for count in range(1, 11):
        assert check_cost([FilterEntry(CREATED)] * count) == 10 * count


@pytest.mark.parametrize("count", [11, 15, 20])
def test_more_than_ten_entries_exceed_the_budget_with_the_contract_body(count):
    entries = [FilterEntry(SEGMENT, f"ses_{i}") for i in range(count - 1)] + [FilterEntry(CHANGED)]
    with pytest.raises(FilterCostExceeded) as caught:
        check_cost(entries)
    body = caught.value.body_fields()
    assert body == {
        "cost": 10 * count,
        "budget": 100,
        "entries": [{"type": SEGMENT, "sessionId": f"ses_{i}", "cost": 10} for i in range(count - 1)]
        + [{"type": CHANGED, "cost": 10}],  # no sessionId key at all when the entry has none
    }
    assert json.loads(json.dumps(body)) == body  # plain JSON values: numbers, strings, lists


def test_the_budget_can_change():
    # §9.2 "the current budget": the check takes it as an argument and reports the one it used.
    assert check_cost([FilterEntry(CREATED)] * 3, budget=30) == 30
    with pytest.raises(FilterCostExceeded) as caught:
        check_cost([FilterEntry(CREATED)] * 4, budget=30)
    assert (caught.value.cost, caught.value.budget) == (40, 30)


def test_subscription_reports_cost_after_validity_and_before_scopes():
    eleven = raw(*[{"type": SEGMENT, "sessionId": f"s{i}"} for i in range(11)])
    # Eleven valid entries: filter_cost_exceeded, even for a credential that could not receive them.
    for scopes in (BOTH, frozenset(), frozenset({SESSIONS})):
        with pytest.raises(FilterCostExceeded) as caught:
            subscription_for(eleven, scopes)
        assert caught.value.body_fields()["cost"] == 110
    # Twenty-one: invalid_filters, not filter_cost_exceeded.
    with pytest.raises(InvalidFilters):
        subscription_for(raw(*[{"type": SEGMENT, "sessionId": f"s{i}"} for i in range(21)]), BOTH)


# --- §4.4 / §6.1: scope per subscribed type -------------------------------------------------

def test_each_type_needs_its_scope():
    assert filters.TYPE_SCOPES == {CREATED: SESSIONS, CHANGED: SESSIONS, SEGMENT: TRANSCRIPTS}
    check_scopes([FilterEntry(CREATED), FilterEntry(CHANGED)], {SESSIONS})
    check_scopes([FilterEntry(SEGMENT, "s1")], {TRANSCRIPTS})
    check_scopes([FilterEntry(CREATED), FilterEntry(SEGMENT, "s1")], BOTH)
    for entries, scopes in [
        ([FilterEntry(CREATED)], {TRANSCRIPTS}),
        ([FilterEntry(CHANGED)], {TRANSCRIPTS, "svc:boards:read"}),
        ([FilterEntry(SEGMENT, "s1")], {SESSIONS}),
        ([FilterEntry(CREATED), FilterEntry(SEGMENT, "s1")], {SESSIONS}),  # one type without scope is enough
        ([FilterEntry(CREATED)], set()),
    ]:
        with pytest.raises(MissingScope):
            check_scopes(entries, scopes)


def test_subscription_with_filters_checks_scope_per_type():
    assert subscription_for(raw({"type": CREATED}), {SESSIONS}).entries == (FilterEntry(CREATED),)
    assert subscription_for(raw({"type": SEGMENT, "sessionId": "s"}), {TRANSCRIPTS}).entries == (
        FilterEntry(SEGMENT, "s"),
    )
    with pytest.raises(MissingScope):
        subscription_for(raw({"type": SEGMENT, "sessionId": "s"}), {SESSIONS, "svc:boards:read"})
    with pytest.raises(MissingScope):
        subscription_for(raw({"type": CHANGED}, {"type": SEGMENT, "sessionId": "s"}), {TRANSCRIPTS})


@pytest.mark.parametrize(
    "scopes, expected",
    [
        (BOTH, {CREATED, CHANGED}),
        ({SESSIONS}, {CREATED, CHANGED}),
        ({TRANSCRIPTS}, set()),
        (set(), set()),
        ({"svc:boards:read", "svc:webhooks:read"}, set()),
    ],
)
def test_without_filters_session_events_the_scopes_allow_and_never_a_403(scopes, expected):
    subscription = subscription_for(None, scopes)
    assert subscription.entries == ()
    assert subscription.default_types == expected
    for type_ in (CREATED, CHANGED):
        assert subscription.matches(type_, "any") is (type_ in expected)
    # Segments are never part of the default, whatever the scopes: they need a sessionId entry.
    assert not subscription.matches(SEGMENT, "any")


# --- §4.4: entries are OR-matched -----------------------------------------------------------

def test_an_entry_matches_its_type_and_if_given_its_session():
    assert FilterEntry(CREATED).matches(CREATED, "s1")
    assert FilterEntry(CREATED).matches(CREATED, "s2")
    assert not FilterEntry(CREATED).matches(CHANGED, "s1")
    assert FilterEntry(CHANGED, "s1").matches(CHANGED, "s1")
    assert not FilterEntry(CHANGED, "s1").matches(CHANGED, "s2")
    assert not FilterEntry(CHANGED, "s1").matches(CREATED, "s1")
    assert not FilterEntry(SEGMENT, "s1").matches(SEGMENT, "S1")  # exact, case-sensitive


def test_entries_are_or_matched():
    subscription = subscription_for(raw(
        {"type": CHANGED},
        {"type": SEGMENT, "sessionId": "s1"},
        {"type": SEGMENT, "sessionId": "s2"},
    ), BOTH)
    assert subscription.matches(CHANGED, "s1") and subscription.matches(CHANGED, "s9")
    assert subscription.matches(SEGMENT, "s1") and subscription.matches(SEGMENT, "s2")
    assert not subscription.matches(SEGMENT, "s3")
    assert not subscription.matches(CREATED, "s1")  # not subscribed: entries replace the default


def test_duplicate_and_overlapping_entries_still_match_once():
    entries = parse_filters(raw({"type": CREATED}, {"type": CREATED}, {"type": CREATED, "sessionId": "s1"}))
    assert matches(entries, CREATED, "s1") is True
    assert matches(entries, CHANGED, "s1") is False
    assert matches([], CREATED, "s1") is False


def test_an_empty_subscription_matches_nothing():
    assert not Subscription().matches(CREATED, "s1")


@pytest.mark.parametrize(
    "subscription",
    [
        Subscription(),
        subscription_for(None, BOTH),
        subscription_for(None, frozenset({"svc:transcripts:read"})),
        subscription_for(raw({"type": CHANGED}, {"type": SEGMENT, "sessionId": "s1"}), BOTH),
        subscription_for(raw({"type": CREATED}, {"type": CREATED, "sessionId": "s1"}), BOTH),
        subscription_for(raw(*[{"type": SEGMENT, "sessionId": f"s{i}"} for i in range(10)]), BOTH),
    ],
)
def test_routes_select_exactly_the_events_matches_accepts(subscription):
    # The hub finds a stream by looking up (type, None) and (type, sessionId) in its routes.
    routes = subscription.routes()
    for type_ in (CREATED, CHANGED, SEGMENT, "board.updated"):
        for session_id in ("s1", "s2", "s9"):
            routed = (type_, None) in routes or (type_, session_id) in routes
            assert routed == subscription.matches(type_, session_id), (type_, session_id)
