"""Search at scale (docs/decisions/search.md "Search at scale"): the index keyed by workspace, the
bounded candidate set, query shapes that must stay bounded, freshness after commit. Small data;
timings belong in bench/."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection, connections

from apps.recordings import services
from apps.recordings.models import Transcript
from apps.recordings.search import postgresql, postgresql_queries, sqlite, windows
from apps.recordings.search import query_terms, search_transcripts
from apps.recordings.search.scoring import segment_score
from apps.recordings.search.windows import CandidateWindow
from tests import factories
from tests.servers import without_request_id

SEARCH = "/api/v1/transcripts/search"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def search_api(api, key, **params):
    response = api.get(SEARCH, key, **params)
    assert response.status_code == 200, response.content
    return response.json()


def hit_sessions(body) -> list[str]:
    return [item["session"]["id"] for item in body["items"]]


def walk(api, key, **params) -> list[str]:
    """Every transcript id of a query, page by page."""
    seen, cursor = [], None
    for _ in range(100):
        body = search_api(api, key, **params, **({"cursor": cursor} if cursor else {}))
        seen += [item["transcriptId"] for item in body["items"]]
        cursor = body["nextCursor"]
        if cursor is None:
            return seen
    raise AssertionError("more pages than hits")


# --- Scoring -----------------------------------------------------------------------------


def test_segment_score_rewards_frequency_and_short_segments():
    keys = ["budget"]
    assert segment_score("budget budget", keys) > segment_score("budget", keys) > 0
    assert segment_score("budget", keys) > segment_score("the budget among many other words of a long turn", keys)
    assert segment_score("no match here", keys) == 0
    # Folded like the index: case and accents do not matter.
    assert segment_score("BÜDGET", keys) == segment_score("budget", keys)
    both = segment_score("alpha beta", ["alpha", "beta"])
    assert both > segment_score("alpha gamma", ["alpha", "beta"])


# --- The candidate set -------------------------------------------------------------------


@pytest.fixture
def small_candidate_set(monkeypatch):
    monkeypatch.setattr(windows, "CANDIDATE_REVISIONS", 5)
    monkeypatch.setattr(windows, "CANDIDATE_SEGMENTS", 2)


def test_more_matching_revisions_than_candidates_ranks_the_newest(api, acme, alice_key, small_candidate_set):
    # The strongest match is an old revision outside the first window: the newest five are
    # ranked first, and it heads the next window.
    old = factories.session(acme, committed=["budget budget budget"], at=at(-1))
    sessions = [factories.session(acme, committed=["budget review"], at=at(i)) for i in range(8)]
    ids = walk(api, alice_key, query="budget", limit=2)
    newest = {t.id for s in sessions[-5:] for t in Transcript.objects.filter(session=s)}
    assert set(ids[:5]) == newest and len(ids) == len(set(ids)) == 9
    assert ids[5] == Transcript.objects.get(session=old).id


def test_a_new_strong_match_enters_the_candidates_first(api, acme, alice_key, small_candidate_set):
    for i in range(8):
        factories.session(acme, committed=["budget review"], at=at(i))
    strong = factories.session(acme, committed=["budget budget budget"], at=at(20))
    body = search_api(api, alice_key, query="budget", limit=1)
    assert hit_sessions(body) == [strong.id]


def test_the_best_of_a_revisions_candidate_segments_is_its_snippet(api, acme, alice_key, small_candidate_set):
    factories.session(acme, committed=["a long turn that mentions the budget once among many words", "budget budget"])
    (item,) = search_api(api, alice_key, query="budget")["items"]
    assert item["snippet"] == "budget budget"


def test_revision_kind_filter_walks_past_the_other_kind(api, acme, alice_key, small_candidate_set):
    finals = []
    for i in range(6):
        s = factories.session(acme, committed=["budget draft"], final=["budget final"], at=at(i))
        finals.append(Transcript.objects.get(session=s, revision_kind="final").id)
    # Committed revisions are interleaved with final ones in the index; the filter still fills
    # the candidate set with final revisions only.
    ids = walk(api, alice_key, query="budget", revisionKind="final", limit=2)
    assert set(ids) == set(finals) and len(ids) == 6


def test_a_revision_with_many_matches_gives_one_hit(api, acme, alice_key, small_candidate_set):
    session = factories.session(acme, committed=[f"budget {i}" for i in range(50)], at=at(1))
    other = factories.session(acme, committed=["budget"], at=at(0))
    assert sorted(hit_sessions(search_api(api, alice_key, query="budget"))) == sorted([session.id, other.id])


@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.parametrize("limit", [1, 4, 100])
def test_postgresql_batches_give_the_same_pages(api, acme, alice_key, monkeypatch, limit):
    """A window's revisions read in one batch or in many give the same pages; a window that
    may read only two revisions gives shorter windows, and paging still reaches every match."""
    for i in range(12):
        texts = ["budget review"] * (i % 3 + 1) + ["other words", f"budget {i} " * (i % 2 + 1)]
        factories.session(acme, committed=texts, final=["budget"] if i % 4 == 0 else None, at=at(i))
    results = {}
    for name, first_batch, max_scanned, sql_words in (("one", 128, 400, 8), ("many", 1, 400, 8), ("bounded", 1, 2, 8),
                                                      ("in python", 128, 400, 1)):  # fmt: skip
        monkeypatch.setattr(postgresql, "FIRST_BATCH", first_batch)
        monkeypatch.setattr(postgresql, "MAX_SCANNED", max_scanned)
        monkeypatch.setattr(postgresql_queries, "SQL_WORDS", sql_words)  # 1: the other words checked in Python
        results[name] = (
            walk(api, alice_key, query="budget", limit=limit),
            walk(api, alice_key, query="review budget", revisionKind="committed", limit=limit),
        )
    assert results["one"] == results["many"] == results["in python"]
    assert [sorted(ids) for ids in results["bounded"]] == [sorted(ids) for ids in results["one"]]
    assert len(results["one"][0]) == 15 and len(results["one"][1]) == 12


def test_postgresql_longer_queries_read_fewer_revisions():
    """A window reads every word's row of each revision it reads, so its bound on revisions
    shrinks with the words beyond SCANNED_WORDS, down to the first batch."""
    read = postgresql.max_revisions_read
    assert [read(n) for n in (1, 2, 3)] == [postgresql.MAX_SCANNED] * 3
    assert read(4) == postgresql.MAX_SCANNED * 3 // 4 < read(3)
    assert read(12) == read(60) == postgresql.FIRST_BATCH


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgresql_windows_of_many_words_still_reach_every_match(api, acme, alice_key, monkeypatch):
    """With a window of a four-word query bounded to one revision read, paging still finds
    every revision holding the four words in one segment, newest first, and no other."""
    for i in range(6):
        texts = ["the plan for the budget review" if i % 2 == 0 else "the plan", "budget review"]
        factories.session(acme, committed=texts, at=at(i))
    expected = walk(api, alice_key, query="the plan budget review")
    monkeypatch.setattr(postgresql, "FIRST_BATCH", 1)
    monkeypatch.setattr(postgresql, "MAX_SCANNED", 2)
    monkeypatch.setattr(postgresql, "SCANNED_WORDS", 1)
    assert postgresql.max_revisions_read(4) == 1
    assert walk(api, alice_key, query="the plan budget review", limit=1) == expected
    assert len(expected) == 3


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgresql_array_literals_and_instants_read_back_exactly(db):
    """The engine sends its id and sequence lists as one array literal each, and reads
    timestamps as microseconds since the epoch."""
    values = ["plain", 'with "quotes"', "back\\slash", "comma,brace}{", " spaced ", "NULL", ""]
    stamp = datetime(2026, 3, 1, 9, 0, 0, 123457, tzinfo=timezone.utc)
    with connection.cursor() as db:
        db.execute(f"SELECT %s::varchar[], %s::integer[], {postgresql_queries.epoch_us('%s::timestamptz')}",
                   [postgresql.array_literal(values), postgresql.array_literal([3, -1, 0]), stamp])  # fmt: skip
        strings, numbers, micros = db.fetchone()
    assert (strings, numbers, postgresql.instant(micros)) == (values, [3, -1, 0], stamp)
    assert postgresql.instant(None) is None


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgresql_sequences_are_intersected_by_intarray_in_its_own_schema(db):
    """Migration 0006: `recordings_sequences_and` is the sorted intersection (empty when there
    is none, NULL for a missing row), and intarray's operators stay out of the search path, so
    the built-in ones on integer[] are what every other query gets."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT recordings_sequences_and('{1,3,5,9}', '{3,4,5,10}'),"
                       " recordings_sequences_and('{1,2}', '{3}'), recordings_sequences_and('{1}', NULL)")  # fmt: skip
        assert cursor.fetchone() == ([3, 5], [], None)
        cursor.execute("SELECT count(*) FROM pg_operator AS o JOIN pg_namespace AS n ON n.oid = o.oprnamespace"
                       " WHERE o.oprname = '&' AND o.oprleft = 'integer[]'::regtype"
                       " AND n.nspname = ANY (current_schemas(true))")  # fmt: skip
        assert cursor.fetchone() == (0,)
        cursor.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'intarray'")
        assert cursor.fetchone() == ("connect_intarray",)


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgresql_the_rarest_word_leads(acme, globex):
    """Words are counted through the index by revision, in the workspace only, each count
    stopping at COUNT_CAP; a word in none of the workspace's revisions means no match at all."""
    for i in range(3):
        factories.session(acme, committed=["budget routine", "budget rare" if i == 0 else "routine"], at=at(i))
    factories.session(globex, committed=["rare rare words"] * 3)
    with connection.cursor() as db:
        assert postgresql.rarest_first(db, ["Routine", "BUDGET", "rare"], acme.id) == ["rare", "budget", "routine"]
        assert postgresql.rarest_first(db, ["budget", "words"], acme.id) is None  # globex's word only
        assert postgresql.rarest_first(db, ["...", "—"], acme.id) is None  # nothing the index keeps
        db.execute(postgresql_queries.WORDS_SQL, [acme.id, 2, "budget routine"])
        assert dict(db.fetchall()) == {"budget": 2, "routine": 2}  # capped at 2


# The index by revision as it should be: every (revision, word) of the segments there are, with
# the sequences of the segments holding the word, from the segments' own search_vector.
REVISION_WORDS_FROM_SEGMENTS = """
    SELECT seg.transcript_id, substr(l.lexeme, length(seg.workspace_id) + 2), seg.workspace_id, t.created_at,
           t.revision_kind, array_agg(seg.sequence ORDER BY seg.sequence)
    FROM recordings_segment AS seg CROSS JOIN LATERAL unnest(tsvector_to_array(seg.search_vector)) AS l(lexeme)
    JOIN recordings_transcript AS t ON t.id = seg.transcript_id
    GROUP BY 1, 2, 3, 4, 5
"""


def assert_revision_words_in_step() -> int:
    with connection.cursor() as db:
        db.execute(REVISION_WORDS_FROM_SEGMENTS)
        expected = sorted(db.fetchall())
        db.execute("SELECT transcript_id, word, workspace_id, created_at, revision_kind, sequences"
                   " FROM recordings_revisionword")  # fmt: skip
        assert sorted(db.fetchall()) == expected
    return len(expected)


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgresql_index_by_revision_follows_every_write_path(acme, globex):
    """Migration 0005's triggers keep `recordings_revisionword` equal to what the segments say,
    through every way segments are written: the numbered appends, the final transcript's
    rewrite (a delete and bulk inserts of 500 rows a statement), inserts out of order, text
    updates, deletes, cascades and the bulk import's COPY."""
    from django.core.management import call_command

    from apps.recordings.models import Segment

    session = factories.session(acme, committed=["budget review", "the plan"], at=at(0))
    for texts in (["budget again"], ["review the budget", "Übermorgen plan"]):
        services.append_committed_segments(session=session, segments=factories.segments(texts))
    assert assert_revision_words_in_step() > 0
    services.write_final_transcript(session=session, segments=factories.segments(
        [f"final budget {i % 7}" for i in range(1200)]))  # fmt: skip
    assert_revision_words_in_step()
    services.write_final_transcript(session=session, segments=factories.segments(["only review now"]))
    assert_revision_words_in_step()
    final = Transcript.objects.get(session=session, revision_kind="final")
    with connection.cursor() as db:
        db.execute("SELECT word FROM recordings_revisionword WHERE transcript_id = %s ORDER BY word", [final.id])
        assert [w for (w,) in db.fetchall()] == ["now", "only", "review"]
    # Out of order: sequences inserted below ones already indexed stay sorted, without duplicates.
    other = factories.session(acme, committed=[], at=at(1))
    transcript = Transcript.objects.create(workspace=acme, session=other, revision_kind="final", created_at=at(1))
    row = dict(workspace=acme, transcript=transcript, session_committed_index=0, timestamp_start=0,
               timestamp_end=1, created_at=at(1))  # fmt: skip
    Segment.objects.bulk_create([Segment(sequence=n, text="budget budget", **row) for n in (5, 9)])
    Segment.objects.bulk_create([Segment(sequence=n, text="budget", **row) for n in (7, 1)])
    assert_revision_words_in_step()
    Segment.objects.filter(transcript=transcript, sequence=7).update(text="plan")
    Segment.objects.filter(transcript=transcript, sequence__in=[1, 9]).update(text="budget memo")
    assert_revision_words_in_step()
    Segment.objects.filter(transcript=transcript, sequence=5).delete()
    assert_revision_words_in_step()
    call_command("seed_demo", workspace=globex.slug, sessions=3, segments=20, no_progress=True, verbosity=0)
    assert assert_revision_words_in_step() > 20
    session.delete()
    other.delete()
    assert_revision_words_in_step()
    with connection.cursor() as db:
        db.execute("SELECT count(*) FROM recordings_revisionword WHERE workspace_id = %s", [acme.id])
        assert db.fetchone() == (0,)


# --- Query shapes that must stay bounded -------------------------------------------------


@pytest.fixture
def meeting(acme):
    return factories.session(
        acme,
        committed=[
            "the budget review for the quarter",
            "the the the and the",
            "supercalifragilisticexpialidocious budget",
            "Zürich café meeting about the budget",
        ],
    )


def test_many_words_all_required(api, meeting, alice_key):
    query = "the budget review for the quarter " + " ".join(f"word{i}" for i in range(60))
    assert search_api(api, alice_key, query=query)["items"] == []
    assert hit_sessions(search_api(api, alice_key, query="the budget review for quarter")) == [meeting.id]


def test_very_common_words(api, meeting, alice_key):
    body = search_api(api, alice_key, query="the")
    assert hit_sessions(body) == [meeting.id]
    assert body["items"][0]["snippet"] == "the the the and the"


def test_long_words(api, meeting, alice_key):
    assert hit_sessions(search_api(api, alice_key, query="supercalifragilisticexpialidocious")) == [meeting.id]
    assert search_api(api, alice_key, query="x" * 500)["items"] == []


@pytest.mark.parametrize(
    "query",
    [
        "budget " * 71 + "the",  # 500 characters, one word repeated
        " ".join(["zürich café"] * 41) + " budget",  # 500 characters, accents, few distinct words
        "a " * 250,  # 250 one-letter words
        ("budget-" * 72)[:500],  # 500 characters of one word glued by punctuation, cut mid-word
    ],
)
def test_500_character_queries(api, meeting, alice_key, query):
    assert len(query) <= 500
    body = search_api(api, alice_key, query=query)
    terms = {t.casefold() for t in query_terms(query)}
    if terms <= {"budget", "the"} or terms == {"budget", "zürich", "café"}:
        assert hit_sessions(body) == [meeting.id]
    else:
        assert body["items"] == []


def test_query_over_500_characters_is_invalid(api, alice_key):
    response = api.get(SEARCH, alice_key, query="b" * 501)
    detail = "query: must be 1 to 500 characters"
    assert response.status_code == 400 and without_request_id(response.json()) == {"error": "invalid_request", "detail": detail}


# --- Tenancy: the index is keyed by workspace --------------------------------------------


def test_a_busy_workspace_never_crowds_out_another(api, acme, globex, alice_key, bob_key, small_candidate_set):
    ours = factories.session(acme, committed=["budget review"], at=at(0))
    for i in range(10):  # newer and stronger matches of another tenant
        factories.session(globex, committed=["budget budget budget"], at=at(i + 1))
    assert hit_sessions(search_api(api, alice_key, query="budget")) == [ours.id]
    assert len(set(walk(api, bob_key, query="budget"))) == 10
    assert ours.id not in hit_sessions(search_api(api, bob_key, query="budget review"))


def test_the_same_words_in_two_workspaces_stay_apart(acme, globex):
    ours = factories.session(acme, committed=["Quarterly café budget"])
    theirs = factories.session(globex, committed=["quarterly CAFE budget"])
    for ws, expected in ((acme, ours), (globex, theirs)):
        hits, _ = search_transcripts(workspace=ws, query="cafe budget", limit=10)
        assert [h.session.id for h in hits] == [expected.id]


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_sqlite_index_rows_lie_in_their_workspace_range(acme, globex):
    factories.session(acme, committed=["budget one", "budget two"], final=["budget"])
    factories.session(globex, committed=["budget three"])
    with connection.cursor() as db:
        db.execute("SELECT workspace_id, id FROM recordings_search_workspace")
        keys = dict(db.fetchall())
        db.execute("SELECT rowid FROM recordings_segment_fts WHERE recordings_segment_fts MATCH 'budget'")
        rowids = [r[0] for r in db.fetchall()]
    ranges = {ws: range(keys[ws] << 44, (keys[ws] + 1) << 44) for ws in (acme.id, globex.id)}
    assert sum(rowid in ranges[acme.id] for rowid in rowids) == 3
    assert sum(rowid in ranges[globex.id] for rowid in rowids) == 1


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_sqlite_newer_revisions_get_lower_keys_and_keys_are_not_reused(acme):
    first = factories.session(acme, committed=["budget"], final=["budget"], at=at(0))
    second = factories.session(acme, committed=["budget"], at=at(1))
    with connection.cursor() as db:
        db.execute("SELECT transcript_id, id FROM recordings_segment_search")
        before = dict(db.fetchall())
    committed_1, final_1 = (Transcript.objects.get(session=first, revision_kind=k).id for k in ("committed", "final"))
    committed_2 = Transcript.objects.get(session=second, revision_kind="committed").id
    assert before[committed_1] > before[final_1] > before[committed_2]
    services.write_final_transcript(session=first, segments=factories.segments(["budget again"]))
    with connection.cursor() as db:
        db.execute("SELECT transcript_id, id FROM recordings_segment_search")
        after = dict(db.fetchall())
    final_2 = Transcript.objects.get(session=first, revision_kind="final").id
    assert final_1 not in after and after[final_2] < min(before.values())


def test_query_plan_is_keyed_by_workspace(acme, globex):
    """The candidate query reads the workspace's part of the index only: SQLite seeks the
    workspace's rowid range; PostgreSQL reads the index by revision from the workspace's key."""
    session = factories.session(acme)
    texts = [f"routine words number {i}" for i in range(3000)] + ["budget review"] * 3
    services.append_committed_segments(session=session, segments=factories.segments(texts))
    factories.session(globex, committed=["budget review"])
    if connection.vendor == "sqlite":
        sql, params = sqlite.step_query(["budget", "review"], acme.id, None, 4)
    else:
        sql, params = postgresql_queries.driver_sql(acme.id, "review", None, None, None, None, 4)
    with connection.cursor() as db:
        if connection.vendor == "sqlite":
            db.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = "\n".join(str(row[-1]) for row in db.fetchall())
            # FTS5's plan names the constraints it consumed: the MATCH (M) and both rowid bounds
            # (> and <), i.e. a seek into the workspace's range, not a filter after the scan.
            fts_line = next(line for line in plan.splitlines() if line.startswith("SCAN f VIRTUAL TABLE INDEX"))
            assert ":M" in fts_line and fts_line.endswith("><"), plan
            assert "SCAN k" not in plan and "recordings_segment " not in plan, plan
            db.execute(sql, params)
            rows = db.fetchall()
            assert {r[1] for r in rows} == {Transcript.objects.get(session=session).id}
        else:
            db.execute("ANALYZE")
            db.execute("SET LOCAL enable_seqscan = off")  # a few thousand rows: see the test above
            explained = {}
            for name, (query, values) in {
                "driver": (sql, params),
                "words": (postgresql_queries.WORDS_SQL, [acme.id, 500, "budget review"]),
                "batch": postgresql_queries.batch_sql(acme.id, ["review", "budget", "routine"], None, None, None,
                                                      None, 128, 4),  # fmt: skip
                "other word": (postgresql_queries.OTHER_WORD_SQL, [["t1", "t2"], "budget"]),
                "texts": (postgresql_queries.TEXTS_SQL, [["t1", "t2"], [0, 1]]),
            }.items():
                db.execute("EXPLAIN " + query, values)
                explained[name] = "\n".join(row[0] for row in db.fetchall())
            # The rarest word's revisions, newest first: one range of the (workspace, word,
            # created_at, id) btree, in its order (no sort), acme's only.
            plan = explained["driver"]
            assert "Index Scan using revision_word_newest on recordings_revisionword" in plan, plan
            assert f"(workspace_id)::text = '{acme.id}'::text" in plan and "word = 'review'" in plan, plan
            assert "Sort" not in plan and "recordings_segment" not in plan, plan
            # Counting a word's revisions reads the same index only (it needs no table column).
            assert "Index Only Scan using revision_word_newest" in explained["words"], explained["words"]
            # The other words of a batch's revisions: by primary key; the texts: by segment key.
            assert "recordings_revisionword_pkey" in explained["other word"], explained["other word"]
            # A batch: the driver's range, and each other word's row of a revision by primary key.
            batch = explained["batch"]
            assert "revision_word_newest" in batch and "recordings_revisionword_pkey" in batch, batch
            # The third word's row is read only while the first two share a sequence (a one-time
            # filter over the intersection so far, in C), never merged into a join filter.
            assert "One-Time Filter: (cardinality(" in batch and "OPERATOR(connect_intarray.&)" in batch, batch
            assert "Join Filter" not in batch and "HashSetOp" not in batch, batch
            assert "segment_unique_sequence" in explained["texts"], explained["texts"]
            # Each candidate revision's transcript and session by key, never a join over all of them.
            texts = explained["texts"]
            assert "on recordings_transcript t" in texts and "on recordings_session s" in texts, texts
            assert "Hash" not in texts, texts
            for name, plan in explained.items():
                assert "Seq Scan" not in plan and "recordings_segment_search_vector" not in plan, (name, plan)
            db.execute(sql, params)
            assert [row[0] for row in db.fetchall()] == [Transcript.objects.get(session=session).id]


# --- Freshness ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_committed_segment_is_found_by_the_next_search_from_another_connection():
    ws = factories.workspace("initech")
    session = factories.session(ws, committed=["opening words"])
    found = []

    def search_elsewhere() -> None:
        try:
            hits, _ = search_transcripts(workspace=ws, query="zeppelin", limit=10)
            found.append([h.session.id for h in hits])
        finally:
            connections.close_all()

    services.append_committed_segments(session=session, segments=factories.segments(["a zeppelin overhead"]))
    thread = threading.Thread(target=search_elsewhere)
    thread.start()
    thread.join(30)
    assert found == [[session.id]]
    # And appending does not disturb what is already indexed.
    hits, _ = search_transcripts(workspace=ws, query="opening", limit=10)
    assert [h.session.id for h in hits] == [session.id]


@pytest.fixture
def common_words_window(monkeypatch):
    """Every word counts as common (COMMON_SHARE 0) and the window is 3 revisions."""
    monkeypatch.setattr(windows, "COMMON_SHARE", 0.0)
    monkeypatch.setattr(windows, "COMMON_QUERY_REVISIONS", 3)
    monkeypatch.setattr(windows, "SAMPLE_REVISIONS", 2)


def test_several_common_words_search_the_newest_revisions_only(api, acme, alice_key, common_words_window):
    old = factories.session(acme, committed=["alpha beta together", "alpha", "beta"], at=at(0))
    for i in range(1, 6):
        factories.session(acme, committed=["alpha alone", "beta alone"], at=at(i))
    newest = factories.session(acme, committed=["alpha beta again"], at=at(9))
    if connection.vendor == "sqlite":
        assert hit_sessions(search_api(api, alice_key, query="alpha beta")) == [newest.id]
    else:  # no ranges there: the index by revision reads matching revisions only
        assert hit_sessions(search_api(api, alice_key, query="alpha beta")) == [newest.id, old.id]
    # One word is never windowed: the walk seeks it through the whole workspace.
    assert old.id in hit_sessions(search_api(api, alice_key, query="alpha", limit=100))


def pages(api, key, **params) -> list[list[dict]]:
    """Every page of a query, items and all."""
    out, cursor = [], None
    for _ in range(200):
        body = search_api(api, key, **params, **({"cursor": cursor} if cursor else {}))
        out.append(body["items"])
        cursor = body["nextCursor"]
        if cursor is None:
            return out
    raise AssertionError("more pages than hits")


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_sqlite_workspace_keys_are_spent_once_per_workspace(acme, globex):
    factories.session(acme, committed=[f"budget {i}" for i in range(40)], final=["budget"] * 10)
    factories.session(acme, committed=["more budget"] * 5)
    factories.session(globex, committed=["budget"])
    with connection.cursor() as db:
        db.execute("SELECT workspace_id, id FROM recordings_search_workspace")
        keys = dict(db.fetchall())
    assert keys[globex.id] == keys[acme.id] + 1


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_sqlite_candidate_times_are_aware_as_the_orm_returns_them(acme):
    session = factories.session(acme, committed=["budget review"], completed=True)  # started and ended
    transcript = Transcript.objects.select_related("session").get(session=session)
    window = CandidateWindow({transcript.id: [0]})
    sqlite.add_candidate_texts(window)
    assert window.texts == {(transcript.id, 0): "budget review"}
    assert window.created == {transcript.id: transcript.session.created_at}
    _, hit_session = window.revisions[transcript.id]
    for name in ("started_at", "ended_at", "created_at"):
        value = getattr(hit_session, name)
        assert value == getattr(transcript.session, name) and (value is None or value.tzinfo is not None), name
