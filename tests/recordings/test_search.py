"""docs/api/search.md (GET /api/v1/transcripts/search): matching, ranking, snippets and cursors."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from apps.core.cursors import encode_cursor
from apps.recordings import services
from apps.recordings.models import Segment, Session, Transcript
from apps.recordings.representations import search_hit_repr
from apps.recordings.search import SearchHit, postgresql_queries, sqlite
from apps.recordings.search.snippets import ELLIPSIS, make_snippet
from apps.recordings.search.terms import query_terms
from tests import factories
from tests.mcp.test_tools import call, ok

SEARCH = "/api/v1/transcripts/search"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
SESSION_SUMMARY_FIELDS = {"id", "label", "status", "startedAt", "endedAt", "createdAt"}


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def search(api, key, **params):
    response = api.get(SEARCH, key, **params)
    assert response.status_code == 200, response.content
    return response.json()


def hit_keys(body) -> list[tuple[str, str]]:
    return [(item["session"]["id"], item["revisionKind"]) for item in body["items"]]


def assert_invalid_request(response):
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_request" and set(body) == {"error", "detail"}  # detail: tests/test_edges.py


# --- Matching --------------------------------------------------------------------------------


def test_a_word_matches_committed_and_final_revisions(api, acme, alice_key):
    session = factories.session(
        acme, committed=["We reviewed the budget today.", "Nothing else."], final=["The budget was reviewed."]
    )
    factories.session(acme, committed=["An unrelated meeting."])
    body = search(api, alice_key, query="budget")
    assert set(body) == {"items", "nextCursor"}
    assert body["nextCursor"] is None
    assert sorted(hit_keys(body)) == [(session.id, "committed"), (session.id, "final")]
    transcripts = {t.revision_kind: t.id for t in Transcript.objects.filter(session=session)}
    for item in body["items"]:
        assert item["transcriptId"] == transcripts[item["revisionKind"]]
        assert set(item["session"]) == SESSION_SUMMARY_FIELDS
        assert {k: item[k] for k in SESSION_SUMMARY_FIELDS} == item["session"]
        assert item["session"]["label"] == "Weekly sync"
        assert "budget" in item["snippet"]


def test_matching_ignores_case_and_punctuation(api, acme, alice_key):
    session = factories.session(acme, committed=["BUDGET-review, Q3!"])
    assert hit_keys(search(api, alice_key, query="budget REVIEW q3")) == [(session.id, "committed")]


def test_words_of_other_scripts_match(api, acme, alice_key):
    session = factories.session(acme, committed=["Die Ärger-Liste: 東京 und Zürich"])
    for query in ["ärger", "ÄRGER", "zürich", "東京"]:
        assert hit_keys(search(api, alice_key, query=query)) == [(session.id, "committed")], query


def test_diacritics_are_ignored_on_both_databases(api, acme, alice_key):
    session = factories.session(acme, committed=["Café crème in Zürich"])
    assert hit_keys(search(api, alice_key, query="cafe creme zurich")) == [(session.id, "committed")]
    assert hit_keys(search(api, alice_key, query="CAFÉ")) == [(session.id, "committed")]


def test_words_are_whole_words_not_prefixes(api, acme, alice_key):
    factories.session(acme, committed=["budgets and budgeting"])
    assert search(api, alice_key, query="budget")["items"] == []


def test_every_word_must_match_in_one_segment(api, acme, alice_key):
    both = factories.session(acme, committed=["alpha and beta together"], at=at(1))
    factories.session(acme, committed=["only alpha here"], at=at(2))
    factories.session(acme, committed=["alpha in one segment", "beta in another"], at=at(3))
    assert hit_keys(search(api, alice_key, query="alpha beta")) == [(both.id, "committed")]
    assert len(search(api, alice_key, query="alpha")["items"]) == 3


def test_one_hit_per_transcript_revision(api, acme, alice_key):
    session = factories.session(acme, committed=[f"budget line {i}" for i in range(30)], final=["budget"] * 5)
    body = search(api, alice_key, query="budget", limit=100)
    assert sorted(hit_keys(body)) == [(session.id, "committed"), (session.id, "final")]


@pytest.mark.parametrize("kind", ["committed", "final"])
def test_revision_kind_filter(api, acme, alice_key, kind):
    session = factories.session(acme, committed=["budget draft"], final=["budget final"])
    body = search(api, alice_key, query="budget", revisionKind=kind)
    assert hit_keys(body) == [(session.id, kind)]


def test_unknown_word_finds_nothing(api, acme, alice_key):
    factories.session(acme, committed=["budget"])
    assert search(api, alice_key, query="zeppelin") == {"items": [], "nextCursor": None}


# --- Ordering --------------------------------------------------------------------------------


def test_best_match_first_then_newest(api, acme, alice_key):
    weak = factories.session(
        acme, committed=["the budget came up once among many other words in a long rambling sentence"], at=at(5)
    )
    strong = factories.session(acme, committed=["budget budget budget"], at=at(1))
    body = search(api, alice_key, query="budget")
    assert hit_keys(body) == [(strong.id, "committed"), (weak.id, "committed")]


def test_equal_matches_are_newest_first_then_by_transcript_id(api, acme, alice_key):
    older = factories.session(acme, committed=["budget review"], at=at(1))
    newer = factories.session(acme, committed=["budget review"], final=["budget review"], at=at(2))
    body = search(api, alice_key, query="budget")
    ids = {t.id: t for t in Transcript.objects.filter(session=newer)}
    newer_pair = [item["transcriptId"] for item in body["items"][:2]]
    assert newer_pair == sorted(ids, reverse=True)
    assert [item["session"]["id"] for item in body["items"]] == [newer.id, newer.id, older.id]


def test_the_best_segment_of_a_transcript_gives_its_snippet(api, acme, alice_key):
    factories.session(
        acme, committed=["budget mentioned in passing during a long discussion of other topics", "budget budget"]
    )
    (item,) = search(api, alice_key, query="budget")["items"]
    assert item["snippet"] == "budget budget"


def test_a_hit_says_where_its_match_is(api, acme, alice_key):
    """`sequence` and `timestampStart` (extensions) are the segment the snippet is cut from:
    the best-scoring matching segment, the earliest of equal ones (issue 23 point 5)."""
    texts = ["opening words", "budget mentioned in passing during a long discussion", "budget budget",
             "more words", "budget budget"]  # fmt: skip
    session = factories.session(acme, committed=texts, final=["no match", "the budget", "the budget"])
    body = search(api, alice_key, query="budget")
    where = {item["revisionKind"]: (item["sequence"], item["timestampStart"], item["snippet"]) for item in body["items"]}
    # factories.segments: segment i starts at i * 2000 ms.
    assert where == {"committed": (2, 4000, "budget budget"), "final": (1, 2000, "the budget")}
    committed = Transcript.objects.get(session=session, revision_kind="committed")
    assert Segment.objects.get(transcript=committed, sequence=2).text == "budget budget"
    # Appended segments continue the revision's sequences; a later match is located there.
    services.append_committed_segments(session=session, segments=factories.segments(["zeppelin", "zeppelin ahead"]))
    (item,) = search(api, alice_key, query="zeppelin ahead")["items"]
    assert (item["sequence"], item["timestampStart"]) == (6, 2000)


# --- Hits as rows: the same JSON as from the models -------------------------------------------


def model_hit(item: dict, query: str) -> dict:
    """The hit as the page answered it before it read rows (the revision and its session loaded
    as model instances, the segment through the ORM), for the revision, segment and snippet
    the page chose."""
    transcript = Transcript.objects.select_related("session").get(id=item["transcriptId"])
    segment = Segment.objects.get(transcript=transcript, sequence=item["sequence"])
    snippet = make_snippet(segment.text, query_terms(query))
    return search_hit_repr(SearchHit(transcript, transcript.session, snippet, segment.sequence, segment.timestamp_start))


@pytest.mark.parametrize("sql_words", [postgresql_queries.SQL_WORDS, 1])
@pytest.mark.parametrize(
    ("query", "params"),
    [("budget", {}), ("budget review", {}), ("Zürich", {}), ("budget", {"revisionKind": "final"}), ("budget", {"limit": 2})],
)
def test_hits_read_as_rows_are_the_models_hits_on_rest_and_mcp(api, acme, alice_key, monkeypatch, query, params,
                                                               sql_words):  # fmt: skip
    """The page reads what its hits show with the candidates' texts (rows, no model instances):
    every item of every page is what the models give, through REST and MCP alike. PostgreSQL
    reads them in the batch that finds the revisions, or (words beyond SQL_WORDS, checked in
    Python) in a statement of their own: the same."""
    if sql_words != postgresql_queries.SQL_WORDS:
        if connection.vendor != "postgresql":
            pytest.skip("PostgreSQL's batches")
        monkeypatch.setattr(postgresql_queries, "SQL_WORDS", sql_words)
    long = " ".join(f"word{i}" for i in range(50)) + " the budget review in Zürich " + "tail " * 40
    factories.session(acme, label=None, committed=["budget review", "Budget, budget!"], at=at(0))
    factories.session(acme, label="Zürich budget", committed=["budget in zürich", long], final=["budget review"],
                      at=at(1))  # fmt: skip
    factories.session(acme, label="Live one", committed=["the budget review, live"], at=at(2))
    factories.session(acme, label="Done", committed=["review of the budget", "budget"], completed=True, at=at(3))
    for n, session in enumerate(Session.objects.filter(workspace=acme)):  # started apart from created, in µs
        Session.objects.filter(id=session.id).update(started_at=at(n) + timedelta(seconds=7, microseconds=1234 * n))
    cursor, rest_items, mcp_items = None, [], []
    while True:
        page = search(api, alice_key, query=query, **params, **({"cursor": cursor} if cursor else {}))
        rest_items += page["items"]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert rest_items and all(item == model_hit(item, query) for item in rest_items)
    arguments = {"query": query, **({"limit": params["limit"]} if "limit" in params else {})}
    while "revisionKind" not in params:  # MCP's search_transcripts takes no revision kind
        body = ok(call(alice_key, "search_transcripts", arguments))
        mcp_items += body["items"]
        if body["nextCursor"] is None:
            assert mcp_items == rest_items
            break
        arguments["cursor"] = body["nextCursor"]


# --- Snippets ----------------------------------------------------------------------------


def test_short_segment_is_its_own_snippet(api, acme, alice_key):
    factories.session(acme, committed=["  The budget\nis approved.  "])
    (item,) = search(api, alice_key, query="budget")["items"]
    assert item["snippet"] == "The budget is approved."


def test_long_segment_snippet_is_cut_around_the_first_match(api, acme, alice_key):
    before = " ".join(f"before{i}" for i in range(60))
    after = " ".join(f"after{i}" for i in range(60))
    factories.session(acme, committed=[f"{before} the Budget was approved {after}"])
    (item,) = search(api, alice_key, query="budget")["items"]
    snippet = item["snippet"]
    assert len(snippet) <= 200
    assert snippet.startswith(ELLIPSIS) and snippet.endswith(ELLIPSIS)
    assert "the Budget was approved" in snippet
    # Cut at word boundaries: every word inside the ellipses is a whole word of the text.
    words = snippet.strip(ELLIPSIS).split()
    assert all(w in f"{before} the Budget was approved {after}".split() for w in words)


def test_snippet_unit_properties():
    rng = random.Random(7)
    vocabulary = ["budget", "alpha", "x", "supercalifragilistic", "é", "東京", "a" * 250]
    for _ in range(500):
        text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 80)))
        snippet = make_snippet(text, ["budget"])
        assert len(snippet) <= 200
        if len(text) <= 200:
            assert snippet == text
        elif "budget" in text:
            assert "budget" in snippet
        if snippet != text:
            assert ELLIPSIS in snippet


def test_snippet_at_the_end_of_a_long_text():
    text = "word " * 100 + "budget"
    snippet = make_snippet(text, ["Budget"])
    assert len(snippet) <= 200 and snippet.startswith(ELLIPSIS) and snippet.endswith("budget")


# --- Query parsing ---------------------------------------------------------------------------


def test_query_terms_are_words_deduplicated():
    assert query_terms('"Budget" budget* NEAR(q3, -review) O\'Brien_x') == ["Budget", "NEAR", "q3", "review", "O", "Brien", "x"]
    assert query_terms("Ärger ärger ARGER Arger") == ["Ärger", "ARGER"]
    assert query_terms(" \"*:-'()^_ ") == []


NASTY_QUERIES = [
    '"', '""', '"budget', "budget*", "*", "NEAR(", "NEAR(budget, review)", "budget OR review", "OR", "AND",
    "NOT budget", "-budget", "budget -review", ":", "text:budget", "'", "budget'", "^budget", "(budget",
    "budget)", "{text}: budget", "\\", "%", "_", "budget%", "'; DROP TABLE recordings_segment; --",
    "budget & review | !x", "budget:*", "<->", "@@",
]


@pytest.mark.parametrize("query", NASTY_QUERIES)
def test_syntax_characters_are_never_syntax(api, acme, alice_key, query):
    session = factories.session(acme, committed=["budget review"])
    body = search(api, alice_key, query=query)
    terms = query_terms(query)
    if not terms:
        assert body == {"items": [], "nextCursor": None}
    elif all(t.lower() in {"budget", "review"} for t in terms):
        assert hit_keys(body) == [(session.id, "committed")]
    else:
        assert body["items"] == []
    assert Segment.objects.count() == 1


@pytest.mark.parametrize("query", ["...", "  ", "---", "***"])
def test_query_without_words_is_an_empty_page(api, acme, alice_key, query):
    factories.session(acme, committed=["budget"])
    assert search(api, alice_key, query=query) == {"items": [], "nextCursor": None}


# --- Validation ------------------------------------------------------------------------------


def test_missing_query_is_invalid_request(api, alice_key):
    assert_invalid_request(api.get(SEARCH, alice_key))


def test_empty_query_is_invalid_request(api, alice_key):
    assert_invalid_request(api.get(SEARCH, alice_key, query=""))


@pytest.mark.parametrize("limit", ["0", "101", "abc", "-1", "1.5", ""])
def test_bad_limit_is_invalid_request(api, alice_key, limit):
    assert_invalid_request(api.get(SEARCH, alice_key, query="budget", limit=limit))


def test_null_character_in_query_is_invalid_request(api, alice_key):
    assert_invalid_request(api.get(SEARCH, alice_key, query="\x00budget"))


def test_bad_revision_kind_is_invalid_request(api, alice_key):
    assert_invalid_request(api.get(SEARCH, alice_key, query="budget", revisionKind="draft"))


def test_search_needs_a_credential(api, db):
    response = api.get(SEARCH, query="budget")
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"


def test_search_needs_the_transcripts_scope(api, alice):
    key = factories.api_key(alice, ["svc:sessions:read"])
    response = api.get(SEARCH, key, query="budget")
    assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"


def test_default_page_size_is_20(api, acme, alice_key):
    for i in range(21):
        factories.session(acme, committed=["budget"], at=at(i))
    body = search(api, alice_key, query="budget")
    assert len(body["items"]) == 20 and body["nextCursor"]


# --- Cursor paging ---------------------------------------------------------------------------


@pytest.fixture
def many_hits(acme):
    """22 revisions (15 committed, 7 final): equal scores (ties broken by time and id) mixed with better and worse."""
    rng = random.Random(3)
    texts = ["budget", "budget review", "budget budget plan", "we talked about the budget for a while"]
    sessions = []
    for i in range(15):
        final = [rng.choice(texts)] if i % 2 else None
        sessions.append(factories.session(acme, committed=[rng.choice(texts)], final=final, at=at(i % 5)))
    return sessions


@pytest.mark.parametrize("limit", [1, 3, 7, 100])
def test_cursor_paging_sees_every_hit_exactly_once_in_order(api, many_hits, alice_key, limit):
    everything = search(api, alice_key, query="budget", limit=100)["items"]
    assert len(everything) == 22
    seen, cursor, pages = [], None, 0
    while True:
        params = {"query": "budget", "limit": limit, **({"cursor": cursor} if cursor else {})}
        body = search(api, alice_key, **params)
        assert len(body["items"]) <= limit
        seen += [item["transcriptId"] for item in body["items"]]
        pages += 1
        cursor = body["nextCursor"]
        if cursor is None:
            break
        assert len(body["items"]) == limit
    assert seen == [item["transcriptId"] for item in everything]
    assert len(set(seen)) == 22
    assert pages == -(-22 // limit)


def test_cursor_paging_with_revision_kind(api, many_hits, alice_key):
    first = search(api, alice_key, query="budget", revisionKind="final", limit=2)
    second = search(api, alice_key, query="budget", revisionKind="final", limit=100, cursor=first["nextCursor"])
    kinds = {item["revisionKind"] for item in first["items"] + second["items"]}
    assert kinds == {"final"} and len(first["items"] + second["items"]) == 7


def test_tampered_cursor_is_invalid_request(api, many_hits, alice_key):
    cursor = search(api, alice_key, query="budget", limit=2)["nextCursor"]
    tampered = cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")
    assert_invalid_request(api.get(SEARCH, alice_key, query="budget", cursor=tampered))
    assert_invalid_request(api.get(SEARCH, alice_key, query="budget", cursor="not-a-cursor"))


def test_cursor_of_another_query_is_invalid_request(api, many_hits, alice_key):
    cursor = search(api, alice_key, query="budget", limit=2)["nextCursor"]
    assert_invalid_request(api.get(SEARCH, alice_key, query="review", cursor=cursor))
    assert_invalid_request(api.get(SEARCH, alice_key, query="budget", revisionKind="final", cursor=cursor))
    # The same words written differently are the same query.
    assert api.get(SEARCH, alice_key, query="  BUDGET!", cursor=cursor).status_code == 200


def test_cursor_of_another_listing_or_workspace_is_invalid_request(api, many_hits, acme, alice_key, bob_key):
    cursor = search(api, alice_key, query="budget", limit=2)["nextCursor"]
    assert_invalid_request(api.get(SEARCH, bob_key, query="budget", cursor=cursor))
    sessions_cursor = api.get("/api/v1/sessions", alice_key, limit=1).json()["nextCursor"]
    assert_invalid_request(api.get(SEARCH, alice_key, query="budget", cursor=sessions_cursor))


@pytest.mark.parametrize("key", [[], ["x"], [None, None, None, None], ["d", "1.0", "2026-01-01T00:00:00", "t"]])
def test_well_signed_cursor_with_a_bad_key_is_invalid_request(api, acme, alice_key, key):
    cursor = encode_cursor("search", acme.id, key)
    assert_invalid_request(api.get(SEARCH, alice_key, query="budget", cursor=cursor))


# --- Tenancy ---------------------------------------------------------------------------------


def test_another_workspaces_transcripts_never_appear(api, acme, globex, alice_key, bob_key):
    ours = factories.session(acme, committed=["budget review"])
    theirs = factories.session(globex, committed=["budget review", "budget"], final=["budget budget budget"])
    assert hit_keys(search(api, alice_key, query="budget", limit=100)) == [(ours.id, "committed")]
    assert sorted(hit_keys(search(api, bob_key, query="budget", limit=100))) == [
        (theirs.id, "committed"),
        (theirs.id, "final"),
    ]


# --- The index follows every write -----------------------------------------------------------


def index_size() -> int:
    """Rows in the full-text index (SQLite) or segments with a search vector (PostgreSQL)."""
    with connection.cursor() as db:
        if connection.vendor == "sqlite":
            db.execute("SELECT count(*) FROM recordings_segment_fts")
            (fts,) = db.fetchone()
            # One transcript key per transcript that has segments, no more, no fewer.
            db.execute(
                "SELECT count(*), (SELECT count(DISTINCT transcript_id) FROM recordings_segment)"
                " FROM recordings_segment_search"
            )
            keys, transcripts = db.fetchone()
            assert keys == transcripts
            return fts
        db.execute("SELECT count(*) FROM recordings_segment WHERE search_vector IS NOT NULL")
        return db.fetchone()[0]


def test_final_rewrite_replaces_the_indexed_text(api, acme, alice_key):
    session = factories.session(acme, committed=["draft words"], final=["obsolete wording"])
    services.write_final_transcript(session=session, segments=factories.segments(["replacement wording"]))
    assert search(api, alice_key, query="obsolete")["items"] == []
    assert hit_keys(search(api, alice_key, query="replacement")) == [(session.id, "final")]
    assert hit_keys(search(api, alice_key, query="wording")) == [(session.id, "final")]
    assert index_size() == Segment.objects.count() == 2


def test_appended_segments_are_found(api, acme, alice_key):
    session = factories.session(acme, committed=["first words"])
    services.append_committed_segments(session=session, segments=factories.segments(["later budget"]))
    assert hit_keys(search(api, alice_key, query="budget")) == [(session.id, "committed")]


def test_deleted_sessions_leave_the_index(api, acme, alice_key):
    gone = factories.session(acme, committed=["budget gone"], final=["budget gone"])
    kept = factories.session(acme, committed=["budget kept"])
    gone.delete()
    assert hit_keys(search(api, alice_key, query="budget")) == [(kept.id, "committed")]
    assert search(api, alice_key, query="gone")["items"] == []
    assert index_size() == Segment.objects.count() == 1


def test_updated_segment_text_is_reindexed(api, acme, alice_key):
    session = factories.session(acme, committed=["old text"])
    Segment.objects.filter(transcript__session=session).update(text="new budget text")
    assert search(api, alice_key, query="old")["items"] == []
    assert hit_keys(search(api, alice_key, query="budget")) == [(session.id, "committed")]
    assert index_size() == 1


def test_resequenced_segment_keeps_its_place_in_the_index(api, acme, alice_key):
    session = factories.session(acme, committed=["plain words", "budget words"])
    Segment.objects.filter(transcript__session=session, sequence=1).update(sequence=7)
    (item,) = search(api, alice_key, query="budget")["items"]
    assert item["snippet"] == "budget words"
    assert index_size() == 2


def test_sequence_outside_the_index_range_is_refused_on_sqlite(acme):
    if connection.vendor != "sqlite":
        pytest.skip("only the SQLite index packs the sequence into its rowid")
    session = factories.session(acme, committed=["budget"])
    with pytest.raises(IntegrityError), transaction.atomic():
        Segment.objects.filter(transcript__session=session).update(sequence=1 << 24)
    assert index_size() == 1


@pytest.mark.django_db(transaction=True)
def test_flush_empties_the_index(api):
    ws = factories.workspace("initech")
    factories.session(ws, committed=["budget one", "budget two"], final=["budget"])
    assert index_size() == 3
    call_command("flush", interactive=False, verbosity=0)
    assert index_size() == 0
    ws = factories.workspace("initech")
    session = factories.session(ws, committed=["budget after flush"])
    key = factories.api_key(factories.member(ws, "pat@initech.test"))
    assert hit_keys(search(api, key, query="budget")) == [(session.id, "committed")]


# --- The plan uses the full-text index -------------------------------------------------------


def test_query_plan_uses_the_full_text_index(acme):
    """The real plan over a workspace big enough that its filter is not selective: matching
    segments are found through the index, never by scanning or LIKE-matching segments."""
    session = factories.session(acme)
    texts = [f"routine words number {i}" for i in range(3000)] + ["budget review"] * 3
    services.append_committed_segments(session=session, segments=factories.segments(texts))
    if connection.vendor == "sqlite":  # the walk's step; the revision kind is filtered after it
        sql, params = sqlite.step_query(["budget", "review"], acme.id, None, 21)
    else:
        sql, params = postgresql_queries.driver_sql(acme.id, "budget", "committed", None, None, None, 21)
    assert "LIKE" not in sql.upper()
    with connection.cursor() as db:
        if connection.vendor == "sqlite":
            db.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = "\n".join(str(row[-1]) for row in db.fetchall())
            assert "SCAN f VIRTUAL TABLE INDEX" in plan, plan
            assert "SEARCH k USING INTEGER PRIMARY KEY" in plan, plan
            assert "SCAN k" not in plan and "recordings_segment " not in plan, plan
        else:
            # The index by revision (migration 0005): the word's revisions newest first, one
            # range of its btree, no sort and no segment read. A few thousand rows fit in a
            # handful of pages, where a sequential scan is cheapest: forbidding it leaves the
            # choice between the indexes.
            db.execute("ANALYZE")
            db.execute("SET LOCAL enable_seqscan = off")
            db.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in db.fetchall())
            assert "Index Scan using revision_word_newest on recordings_revisionword" in plan, plan
            assert "Sort" not in plan and "recordings_segment" not in plan, plan
