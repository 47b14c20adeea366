"""PostgreSQL search's batches (apps/recordings/search/postgresql.py): the other words read as
ranges beside the rarest word's or by one lookup per revision, prepared once per connection or
run as they are, with generic or custom plans, give the same pages; a connection that lost its
prepared statements prepares them again; the ranged plan reads indexes only (EXPLAIN)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection, transaction

from apps.recordings.search import postgresql, postgresql_queries, search_transcripts
from engine.postgresql import prepared
from tests import factories

pytestmark = pytest.mark.skipif("connection.vendor != 'postgresql'")

SEARCH = "/api/v1/transcripts/search"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
QUERIES = [
    ("budget", None), ("budget review", None), ("review budget", "committed"), ("routine budget review", None),
    ("rare budget", None), ("rare", "final"), ("budget routine words", None), ("alpha omega", None),
]  # fmt: skip


def seed(ws, sessions: int = 24) -> None:
    """Words of every frequency: `budget` and `review` in most revisions (together in some
    segments), `routine` in every other, `rare` in a few, `words` everywhere; final revisions
    for some sessions."""
    for i in range(sessions):
        committed = ["budget review" if i % 3 else "budget and the review apart", "routine words" if i % 2 else "words",
                     f"budget words {i}", "review words"] + (["rare budget"] if i % 7 == 0 else [])  # fmt: skip
        final = ["budget review routine words", "rare"] if i % 4 == 0 else None
        factories.session(ws, committed=committed, final=final, at=T0 + timedelta(minutes=i))


def pages(api, key, query: str, kind: str | None, limit: int) -> list[dict]:
    """Every page of a query (items and what the cursors carry), in order."""
    bodies, cursor = [], None
    for _ in range(200):
        params = {"query": query, "limit": limit, **({"revisionKind": kind} if kind else {}),
                  **({"cursor": cursor} if cursor else {})}  # fmt: skip
        response = api.get(SEARCH, key, **params)
        assert response.status_code == 200, response.content
        body = response.json()
        cursor = body["nextCursor"]
        # A cursor is signed with the time it was made (django.core.signing): what it carries
        # is the part before the first colon.
        bodies.append({**body, "nextCursor": cursor and cursor.split(":")[0]})
        if cursor is None:
            return bodies
    raise AssertionError("more pages than hits")


def every_page(api, key, limit: int) -> dict:
    return {(query, kind): pages(api, key, query, kind, limit) for query, kind in QUERIES}


def plan_cache_mode() -> str:
    with connection.cursor() as db:
        db.execute("SHOW plan_cache_mode")
        return db.fetchone()[0]


def prepared_names() -> set[str]:
    with connection.cursor() as db:
        db.execute("SELECT name FROM pg_prepared_statements")
        return {name for (name,) in db.fetchall()}


def forget_prepared() -> None:
    with connection.cursor() as db:
        db.execute("DEALLOCATE ALL")
    prepared._prepared.pop(connection.connection, None)


@pytest.fixture
def seeded(transactional_db):
    # Outside a test transaction: inside one the statements run unprepared.
    acme = factories.workspace("acme")
    seed(acme)
    return acme, factories.api_key(factories.member(acme, "alice@acme.test"), factories.ALL_SCOPES)


@pytest.mark.parametrize("limit", [3, 100])
def test_ranges_lookups_prepared_and_generic_plans_give_the_same_pages(api, seeded, monkeypatch, limit):
    acme, key = seeded
    # As before: every other word looked up per revision, every statement run as it is.
    monkeypatch.setattr(postgresql, "RANGE_RATIO", 0)
    forget_prepared()  # what this connection prepared before (seen in full runs) is not the block's
    with transaction.atomic():
        expected = every_page(api, key, limit)
    assert not any(name.startswith("connect_s_") for name in prepared_names()), prepared_names()
    monkeypatch.undo()
    assert sum(len(body["items"]) for body in expected["budget", None]) == 24 + 6  # committed and final
    assert expected["rare budget", None][0]["items"] and not expected["alpha omega", None][0]["items"]
    variants = {
        "ranges": {},
        "ranges in small batches": {"FIRST_BATCH": 2},
        # Ranges that stop at their bound: older revisions fall back to the lookup.
        "ranges cut short": {"FIRST_BATCH": 4, "RANGE_ROWS": 0.3},
        "ranges of one row": {"RANGE_ROWS": 0},
        "other words in Python": {"SQL_WORDS": 2},
    }
    for name, settings in variants.items():
        monkeypatch.undo()
        for setting, value in settings.items():
            monkeypatch.setattr(postgresql_queries if hasattr(postgresql_queries, setting) else postgresql, setting, value)
        assert every_page(api, key, limit) == expected, name
    assert any(name.startswith("connect_s_") for name in prepared_names())
    # Generic plans (what PostgreSQL settles on after five runs of a prepared statement).
    monkeypatch.undo()
    with connection.cursor() as db:
        db.execute("DEALLOCATE ALL")
        db.execute("SET plan_cache_mode = force_generic_plan")
    try:
        assert every_page(api, key, limit) == expected
    finally:
        with connection.cursor() as db:
            db.execute("RESET plan_cache_mode")


def test_ranged_words_are_those_about_as_frequent_as_the_rarest(monkeypatch):
    monkeypatch.setattr(postgresql, "RANGE_RATIO", 4)
    assert postgresql.ranged_words([("rare", 3), ("less", 12), ("common", 13)]) == 1
    assert postgresql.ranged_words([("a", 500), ("b", 500), ("c", 500)]) == 2  # capped: as frequent
    assert postgresql.ranged_words([("only", 7)]) == 0


def test_a_connection_that_lost_its_statements_prepares_them_again(seeded):
    acme, _ = seeded

    def search(query: str):
        hits, cursor = search_transcripts(workspace=acme, query=query, limit=5)
        return hits, cursor and cursor.split(":")[0]  # what it carries, without the signing time

    forget_prepared()  # what this connection prepared before (another test's shapes) is not this test's
    expected = {query: search(query) for query, _ in QUERIES}
    assert expected["budget review"][0]
    names = {name for name in prepared_names() if name.startswith("connect_s_")}
    assert names and "connect_search_words" in prepared_names()
    with connection.cursor() as db:
        db.execute("DEALLOCATE ALL")  # as a pooler's reset would
    assert {query: search(query) for query, _ in QUERIES} == expected
    assert names <= prepared_names()
    # The connection still has them, but this process forgot it had prepared them (a pooler
    # that handed over another server connection, which has them): PREPARE fails, EXECUTE runs.
    prepared._prepared.pop(connection.connection)
    assert {query: search(query) for query, _ in QUERIES} == expected
    # DISCARD ALL (a pooler's reset) also resets the session's settings: set again with them.
    with connection.cursor() as db:
        db.execute("DISCARD ALL")
    assert {query: search(query) for query, _ in QUERIES} == expected
    assert plan_cache_mode() == "force_generic_plan"
    with connection.cursor() as db:  # every run of them has taken the plan made once
        db.execute("SELECT sum(custom_plans), sum(generic_plans) FROM pg_prepared_statements WHERE name LIKE 'connect_s%%'")
        custom, generic = db.fetchone()
    assert custom == 0 and generic >= len(QUERIES), (custom, generic)
    # A new connection.
    connection.close()
    assert {query: search(query) for query, _ in QUERIES} == expected
    assert names <= prepared_names()


def test_a_ranged_batch_reads_indexes_only(db):
    """A batch whose other words are ranges: three ranges of the index by revision (the
    driver's and one per word) joined to the driver's rows (by hash on the bench data; these few
    rows get a nested loop), the fallback by primary key, no sequential scan, as PostgreSQL
    plans it once prepared (a generic plan)."""
    acme = factories.workspace("acme")
    seed(acme, sessions=8)
    words = ["budget", "review", "routine"]
    sql, params = postgresql_queries.batch_sql(acme.id, words, "committed", (T0, "z"), None, None, 128, 4,
                                               texts_for=100, ranged=2)  # fmt: skip
    with connection.cursor() as db:
        db.execute("ANALYZE")
        db.execute("SET LOCAL enable_seqscan = off")  # a few rows: the planner would read them all
        db.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        db.execute(f"PREPARE connect_test_ranged AS {prepared.numbered(sql)}")
        db.execute(f"EXPLAIN EXECUTE connect_test_ranged({', '.join(['%s'] * len(params))})", params)
        plan = "\n".join(row[0] for row in db.fetchall())
        db.execute("DEALLOCATE connect_test_ranged")
    # (On these few rows the planner may read an index through a bitmap, and sort the driver's
    # range; tests/recordings/test_search_scale.py checks the driver's plan on more data.)
    assert plan.count("revision_word_newest") == 3, plan  # the driver's range and the two words'
    # Each word's range is bounded by the driver's created_at in the index condition.
    assert len(re.findall(r"Index Cond: .*\(created_at <= \$\d+\) AND \(created_at >= \$\d+\)", plan)) == 2, plan
    assert "CTE Scan on r1 j1" in plan and "CTE Scan on r2 j2" in plan, plan  # joined to the driver's
    assert plan.count("recordings_revisionword_pkey") == 2, plan  # the fallbacks (by index or bitmap)
    assert "Seq Scan" not in plan and "recordings_segment_search_vector" not in plan, plan


def test_a_query_of_one_term_is_counted_once(db, monkeypatch):
    """The words of a one-term query are remembered from its first count: later searches skip
    the count and find the same, also when the word is in no revision (now or any more)."""
    acme = factories.workspace("acme")
    seed(acme, sessions=6)
    monkeypatch.setattr(postgresql, "_ONE_TERM_WORDS", {})
    statements = []

    def searched(query: str):
        def log(execute, sql, params, many, context):
            statements.append(sql)
            return execute(sql, params, many, context)

        statements.clear()
        with connection.execute_wrapper(log):
            return search_transcripts(workspace=acme, query=query, limit=3)

    def counted() -> bool:
        return any(postgresql_queries.WORDS_SQL in sql for sql in statements)

    for query in ("Budget", "zeppelin", "budget review"):
        first = searched(query)
        assert counted()
        assert searched(query) == first
        assert counted() == (query == "budget review")  # two terms: counted every time
    assert postgresql._ONE_TERM_WORDS == {"Budget": ("budget",), "zeppelin": ("zeppelin",)}
    assert searched("Budget")[0] and searched("zeppelin") == ([], None)
    # Searched while the word is in no revision any more: nothing, as the count would say.
    from apps.recordings.models import Segment
    Segment.objects.filter(workspace_id=acme.id).delete()
    assert searched("Budget") == ([], None) and not counted()
