"""Search in windows: every matching revision is reachable by paging, however many match.

The candidate set is cut to 3 revisions here, so ten matches span four windows: a page holds
hits of one window, ranked in it, and the cursor goes on into the next window (older matches)
until nothing further matches (apps/recordings/search/, docs/decisions/search.md "Search at scale")."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection

from apps.core.cursors import CURSOR_DETAIL, encode_cursor
from apps.recordings.models import Transcript
from apps.recordings.search import postgresql, sqlite, windows
from apps.recordings.search.cursors import scope_digest
from apps.recordings.search.scoring import segment_score
from tests import factories

SEARCH = "/api/v1/transcripts/search"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
WINDOW = 3
TEXTS = [
    "budget",
    "budget budget plan",
    "we talked about the budget for a long while today",
    "budget review",
    "budget budget budget",
]


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def get(api, key, **params):
    response = api.get(SEARCH, key, **params)
    assert response.status_code == 200, response.content
    return response.json()


def pages(api, key, **params) -> list[list[str]]:
    """Every page of a query, as lists of transcript ids; asserts the cursor rules on the way."""
    result, cursor = [], None
    for _ in range(200):
        body = get(api, key, **params, **({"cursor": cursor} if cursor else {}))
        assert len(body["items"]) <= params.get("limit", 20)
        result.append([item["transcriptId"] for item in body["items"]])
        cursor = body["nextCursor"]
        if cursor is None:
            return result
    raise AssertionError("the cursor never ends")


def flat(page_list: list[list[str]]) -> list[str]:
    return [t for page in page_list for t in page]


def expected_order(transcripts: list[Transcript], text: dict[str, str]) -> list[str]:
    """Windows of WINDOW revisions, newest first; in each, best score, then session newest,
    then transcript id (each revision here has one matching segment)."""
    newest_first = sorted(transcripts, key=lambda t: t.created_at, reverse=True)
    order = []
    for i in range(0, len(newest_first), WINDOW):
        window = newest_first[i : i + WINDOW]
        window.sort(key=lambda t: (segment_score(text[t.id], ["budget"]), t.session.created_at, t.id), reverse=True)
        order += [t.id for t in window]
    return order


@pytest.fixture
def windowed(monkeypatch):
    monkeypatch.setattr(windows, "CANDIDATE_REVISIONS", WINDOW)
    monkeypatch.setattr(windows, "CANDIDATE_SEGMENTS", 2)


@pytest.fixture(params=["one batch", "batches of one"])
def plan(request, monkeypatch):
    """PostgreSQL reads a window's revisions in batches (the first FIRST_BATCH, then twice as
    many each time): one batch or many, the window and its pages are the same."""
    if connection.vendor != "postgresql":
        if request.param != "one batch":
            pytest.skip("no batches on SQLite")
        return request.param
    if request.param == "batches of one":
        monkeypatch.setattr(postgresql, "FIRST_BATCH", 1)
    return request.param


@pytest.fixture
def ten_matches(acme):
    """Ten matching committed revisions of mixed strength, among sessions that do not match."""
    transcripts, text = [], {}
    for i in range(13):
        if i % 4 == 3:
            factories.session(acme, committed=["nothing relevant here"], at=at(i))
            continue
        words = TEXTS[i % len(TEXTS)]
        s = factories.session(acme, committed=["an opening line", words], at=at(i))
        t = Transcript.objects.select_related("session").get(session=s)
        transcripts.append(t)
        text[t.id] = words
    assert len(transcripts) == 10
    return transcripts, text


@pytest.mark.parametrize("limit", [1, 2, 3, 100])
def test_paging_visits_every_match_once_window_by_window(api, alice_key, windowed, plan, ten_matches, limit):
    transcripts, text = ten_matches
    result = pages(api, alice_key, query="budget", limit=limit)
    seen = flat(result)
    assert seen == expected_order(transcripts, text)
    assert len(set(seen)) == 10
    # Only the last page ends the walk, and it is not an empty page after a full one.
    assert all(result[:-1]) and result[-1]
    if limit == 100:
        assert [len(p) for p in result] == [3, 3, 3, 1]  # one window per page


def test_revision_kind_filter_across_windows(api, acme, alice_key, windowed, plan):
    finals, committed = [], []
    for i in range(8):
        s = factories.session(acme, committed=["budget draft"], final=["budget final"] if i % 3 else None, at=at(i))
        for t in Transcript.objects.filter(session=s):
            (finals if t.revision_kind == "final" else committed).append(t.id)
    assert len(finals) == 5 and len(committed) == 8
    for kind, ids in (("final", finals), ("committed", committed)):
        seen = flat(pages(api, alice_key, query="budget", revisionKind=kind, limit=2))
        assert sorted(seen) == sorted(ids), kind
    both = flat(pages(api, alice_key, query="budget", limit=2))
    assert sorted(both) == sorted(finals + committed)


def test_several_common_words_reach_older_revisions_window_by_window(api, acme, alice_key, windowed, monkeypatch):
    # SQLite: every word counts as common, so each window is a range of the 3 next revisions,
    # matching or not. PostgreSQL's index by revision has no such ranges: its windows are
    # matching revisions.
    monkeypatch.setattr(windows, "COMMON_SHARE", 0.0)
    monkeypatch.setattr(windows, "COMMON_QUERY_REVISIONS", 3)
    monkeypatch.setattr(windows, "SAMPLE_REVISIONS", 2)
    matching = []
    for i in range(10):
        both = i in (0, 4, 9)
        s = factories.session(acme, committed=["alpha beta together" if both else "alpha alone", "beta alone"],
                              at=at(i))  # fmt: skip
        if both:
            matching.append(Transcript.objects.get(session=s).id)
    result = pages(api, alice_key, query="alpha beta", limit=2)
    assert flat(result) == matching[::-1]
    if connection.vendor == "sqlite":
        # The first window (the 3 newest revisions) holds the newest match only; ranges without
        # a match give empty pages that still carry a cursor.
        assert result[0] == [matching[-1]] and [] in result
    else:
        assert result == [matching[:0:-1], [matching[0]]]  # windows of 3 matches: 2 hits, then 1


def test_a_walk_stopped_by_its_bound_continues_where_it_stopped(api, acme, alice_key, windowed, monkeypatch):
    # SQLite: one step (two rows) per request; PostgreSQL: two revisions read per window.
    monkeypatch.setattr(sqlite, "MAX_STEPS", 1)
    monkeypatch.setattr(postgresql, "MAX_SCANNED", 2)
    ids = []
    for i in range(9):
        texts = ["budget one", "budget two", "budget three"] if i % 3 else ["no match"]
        s = factories.session(acme, committed=texts, final=["budget"] if i % 2 else None, at=at(i))
        ids += [t.id for t in Transcript.objects.filter(session=s) if i % 3 or t.revision_kind == "final"]
    result = pages(api, alice_key, query="budget", revisionKind="committed", limit=3)
    expected = [t.id for t in Transcript.objects.filter(id__in=ids, revision_kind="committed")]
    assert sorted(flat(result)) == sorted(expected) and len(flat(result)) == 6
    assert any(len(page) < 3 for page in result[:-1])  # short pages, and the cursor went on
    assert sorted(flat(pages(api, alice_key, query="budget", limit=3))) == sorted(ids)


def test_a_window_is_kept_while_it_is_paged(api, acme, alice_key, windowed, plan):
    for i in range(5):
        factories.session(acme, committed=["budget review"], at=at(i))
    strongest = factories.session(acme, committed=["budget budget budget"], at=at(5))
    for i in range(6, 8):
        factories.session(acme, committed=["budget review"], at=at(i))
    first = get(api, alice_key, query="budget", limit=1)
    assert [item["session"]["id"] for item in first["items"]] == [strongest.id]
    # A newer match written now would push `strongest` out of the first window if that window
    # were found again from the newest revision: it would then come a second time.
    factories.session(acme, committed=["budget"], at=at(9))
    seen = [strongest.id]
    cursor = first["nextCursor"]
    for _ in range(20):
        body = get(api, alice_key, query="budget", limit=1, cursor=cursor)
        seen += [item["session"]["id"] for item in body["items"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert cursor is None and len(seen) == len(set(seen)) == 8


def test_cursors_of_any_window_stay_bound_to_words_and_filter(api, alice_key, windowed, ten_matches):
    cursors, cursor = [], None
    for _ in range(20):
        body = get(api, alice_key, query="budget", limit=2, **({"cursor": cursor} if cursor else {}))
        cursor = body["nextCursor"]
        if cursor is None:
            break
        cursors.append(cursor)
    assert cursor is None and len(cursors) >= 5  # in-window cursors and cursors into a next window
    for cursor in cursors:
        for other in ({"query": "budget review"}, {"query": "review"}, {"query": "budget", "revisionKind": "final"}):
            response = api.get(SEARCH, alice_key, cursor=cursor, **other)
            assert response.status_code == 400 and response.json() == {"error": "invalid_request", "detail": CURSOR_DETAIL}
        assert api.get(SEARCH, alice_key, query="BUDGET", cursor=cursor).status_code == 200


@pytest.mark.parametrize(
    "tail",
    [
        ["next", None],
        ["next", "x"],
        ["next", True],
        ["next", -1],
        ["next", [1, 2]],
        ["next", 1, 2],
        ["in", None, None, True, 1.0, "2026-01-01T00:00:00+00:00", "t"],
        ["in", 1, 2, "yes", 1.0, "2026-01-01T00:00:00+00:00", "t"],
        ["in", 1, 2, True, "1.0", "2026-01-01T00:00:00+00:00", "t"],
        ["in", 1, 2, True, 1.0, "not a time", "t"],
        ["in", 1, 2, True, 1.0, "2026-01-01T00:00:00+00:00"],
        ["later", 1],
    ],
)
def test_well_signed_window_cursor_with_a_bad_key_is_invalid_request(api, acme, alice_key, tail):
    digest = scope_digest(["budget"], None)
    key = [tail[0], digest, *tail[1:]]
    if connection.vendor == "postgresql":  # positions are (created_at, id) pairs there
        key = [["2026-01-01T00:00:00+00:00", "t"] if isinstance(v, int) and not isinstance(v, bool) and v >= 0
               else v for v in key]  # fmt: skip
    response = api.get(SEARCH, alice_key, query="budget", cursor=encode_cursor("search", acme.id, key))
    assert response.status_code == 400 and response.json() == {"error": "invalid_request", "detail": CURSOR_DETAIL}
