"""PostgreSQL search ranked from the weights kept in the index by revision (migration 0008):
the database splits a text as scoring does, the triggers keep every weight right through
appends, rewrites, deletes and updates (and the rebuild gives the same rows), a window is
ranked from the index alone (no candidate's text, transcript or session), and every page is the same as when each
candidate is scored from its text, non-ASCII texts (scored from their texts) included."""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta, timezone
from importlib import import_module

import pytest
from django.db import connection

from apps.recordings import services
from apps.recordings.models import Segment
from apps.recordings.search import postgresql, postgresql_queries, search_transcripts
from apps.recordings.search.terms import folded_words
from tests import factories

pytestmark = pytest.mark.skipif("connection.vendor != 'postgresql'")

WEIGHTS = import_module("apps.recordings.migrations.0008_search_revision_word_weights")
SEARCH = "/api/v1/transcripts/search"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
# Characters that make ASCII text hard to split: punctuation, digits, underscores, quotes,
# hyphens, URLs and addresses, markup, whitespace of every kind.
ASCII_PIECES = ["budget", "Review", "REVIEW", "re-view", "e-mail", "don't", "3.5", "v1.2", "abc123", "x_y", "_",
                "http://budget.example/review?q=1", "bob@review.test", "<b>budget</b>", "&amp;", "\t", "\n", "  ",
                ".", ",", "!", "?", "--", "(", ")", "'", '"', "42", "a", "I"]  # fmt: skip
OTHER_PIECES = ["café", "naïve", "Straße", "ＦＵＬＬ", "İstanbul", "ﬁle", "review…", "budget—review", "東京"]


def random_text(draw: random.Random, pieces: list[str], words: int) -> str:
    return "".join(draw.choice(pieces) + draw.choice(["", " ", "  "]) for _ in range(words))


def expected_weight(text: str, word: str) -> int:
    """What migration 0008 says a segment's weight for `word` is, from scoring's own split."""
    if not text.isascii():
        return -1
    words = folded_words(text)
    return len(words) * (1 << postgresql.OCCURRENCE_BITS) + words.count(word)


def index_rows(workspace_id: str) -> dict[tuple[str, str], tuple[list[int], list[int]]]:
    with connection.cursor() as db:
        db.execute("SELECT transcript_id, word, sequences, weights FROM recordings_revisionword"
                   " WHERE workspace_id = %s", [workspace_id])  # fmt: skip
        return {(t, w): (s, wt) for t, w, s, wt in db.fetchall()}


def expected_rows(workspace_id: str) -> dict[tuple[str, str], tuple[list[int], list[int]]]:
    """The index rows the segments make, with weights from `folded_words`."""
    rows: dict[tuple[str, str], list[tuple[int, int]]] = {}
    with connection.cursor() as db:
        db.execute("SELECT transcript_id, sequence, text, tsvector_to_array(search_vector) FROM recordings_segment"
                   " WHERE workspace_id = %s", [workspace_id])  # fmt: skip
        for transcript_id, sequence, text, lexemes in db.fetchall():
            for lexeme in lexemes:
                word = lexeme.split(":", 1)[1]
                rows.setdefault((transcript_id, word), []).append((sequence, expected_weight(text, word)))
    return {key: ([s for s, _ in sorted(pairs)], [w for _, w in sorted(pairs)]) for key, pairs in rows.items()}


def test_the_database_splits_ascii_text_as_scoring_does(db):
    draw = random.Random(8)
    texts = [random_text(draw, ASCII_PIECES, draw.randint(0, 40)) for _ in range(400)] + ["", " ", "-", "A"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT t, recordings_search_words(t) FROM unnest(%s::text[]) AS t", [texts])
        split = dict(cursor.fetchall())
        cursor.execute("SELECT t, recordings_search_words(t) FROM unnest(%s::text[]) AS t", [OTHER_PIECES])
        unknown = dict(cursor.fetchall())
    assert all(split[text] == folded_words(text) for text in texts)
    assert all(words is None for words in unknown.values()), unknown  # not ASCII: not split here


def test_triggers_keep_every_weight_through_appends_rewrites_deletes_and_updates(db):
    acme = factories.workspace("acme")
    draw = random.Random(24)
    pieces = ASCII_PIECES + OTHER_PIECES[:3]
    sessions = []
    for i in range(6):
        committed = [random_text(draw, pieces, draw.randint(1, 12)) for _ in range(8)]
        session = factories.session(acme, committed=committed[:4], at=T0 + timedelta(minutes=i))
        for text in committed[4:]:  # appends one at a time: the sorted concatenation
            services.append_committed_segments(session=session, segments=factories.segments([text]))
        if i % 2:
            session = services.change_session_status(session=session, status="completed")
            services.write_final_transcript(session=session, segments=factories.segments(committed[::-1]))
        sessions.append(session)
    assert index_rows(acme.id) == expected_rows(acme.id)
    # A rewritten final transcript, deleted segments (some rows lose sequences, some go), an
    # updated text, and a segment put back between others (the sorted merge).
    services.write_final_transcript(session=sessions[1], segments=factories.segments(["budget review", "Budget"]))
    committed = Segment.objects.filter(transcript__session=sessions[0], transcript__revision_kind="committed")
    committed.filter(sequence__in=[1, 5]).delete()
    Segment.objects.filter(pk=committed.get(sequence=2).pk).update(text="review review budget, naïve? budget")
    Segment.objects.filter(pk=committed.get(sequence=3).pk).update(text="café budget")
    survivor = committed.get(sequence=4)
    Segment.objects.create(workspace_id=acme.id, transcript_id=survivor.transcript_id, sequence=1,
                           session_committed_index=1, timestamp_start=0, timestamp_end=1, text="Budget, budget: REVIEW",
                           created_at=T0)  # fmt: skip
    rows = index_rows(acme.id)
    assert rows == expected_rows(acme.id)
    assert any(-1 in weights for _, weights in rows.values())  # non-ASCII texts are in it, unknown
    # The migration's rebuild from the segments gives the very rows the triggers kept.
    with connection.cursor() as cursor:
        for statement in WEIGHTS.POSTGRESQL_INSTALL[-4:]:
            cursor.execute(statement)
    assert index_rows(acme.id) == rows


def seed(ws, sessions: int = 30) -> None:
    """`budget` and `review` in most revisions, often several times in one segment, with
    segments of every length; non-ASCII texts in some revisions (every third), so some of a
    window's revisions are scored from their texts."""
    draw = random.Random(5)
    for i in range(sessions):
        texts = [random_text(draw, ["budget", "review", "and", "the", "Budget", "plan", "review,"], draw.randint(1, 9))
                 for _ in range(6)]  # fmt: skip
        if i % 3 == 0:
            texts[draw.randrange(6)] += " café budget review"
        final = [t.upper() for t in texts[::-1]] if i % 4 == 0 else None
        factories.session(ws, committed=texts, final=final, at=T0 + timedelta(minutes=i))


def pages(api, key, query: str, limit: int) -> list[dict]:
    bodies, cursor = [], None
    for _ in range(200):
        response = api.get(SEARCH, key, query=query, limit=limit, **({"cursor": cursor} if cursor else {}))
        assert response.status_code == 200, response.content
        body = response.json()
        cursor = body["nextCursor"]
        bodies.append({**body, "nextCursor": cursor and cursor.split(":")[0]})  # without the signing time
        if cursor is None:
            return bodies
    raise AssertionError("more pages than hits")


QUERIES = ["budget", "Review", "budget review", "review the budget", "plan budget", "café", "budget café", "zeppelin"]


@pytest.fixture
def seeded(transactional_db):
    # Outside a test transaction, as in service: the statements are prepared.
    acme = factories.workspace("acme")
    seed(acme)
    return acme, factories.api_key(factories.member(acme, "alice@acme.test"), factories.ALL_SCOPES)


@pytest.mark.parametrize("limit", [1, 4, 100])
def test_pages_ranked_from_weights_are_those_ranked_from_texts(api, seeded, monkeypatch, limit):
    acme, key = seeded
    monkeypatch.setattr(postgresql, "WEIGHTED", False)
    expected = {query: pages(api, key, query, limit) for query in QUERIES}
    assert sum(len(body["items"]) for body in expected["budget"]) > 30
    monkeypatch.setattr(postgresql, "WEIGHTED", True)
    for name, settings in {"weights": {}, "weights in small batches": {"FIRST_BATCH": 2},
                           "weights and ranges": {"RANGE_RATIO": 100}, "weights and lookups": {"RANGE_RATIO": 0},
                           "weights, ranges cut short": {"RANGE_ROWS": 0.3, "FIRST_BATCH": 3}}.items():  # fmt: skip
        monkeypatch.undo()
        for setting, value in settings.items():
            module = postgresql_queries if hasattr(postgresql_queries, setting) else postgresql
            monkeypatch.setattr(module, setting, value)
        assert {query: pages(api, key, query, limit) for query in QUERIES} == expected, name


def statements_of(query: str, workspace, limit: int = 5) -> tuple[list[str], tuple]:
    logged = []

    def log(execute, sql, params, many, context):
        logged.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(log):
        found = search_transcripts(workspace=workspace, query=query, limit=limit)
    return logged, found


def texts_read(logged: list[str]) -> list[str]:
    """The statements run (prepared ones by name; a PREPARE is not a run) that read texts."""
    names = [sql.split()[1].split("(")[0] for sql in logged if sql.startswith("EXECUTE")]
    return [name for name in names if name in ("connect_search_page", "connect_search_texts")]


def test_a_weighted_window_reads_only_its_pages_texts(seeded, monkeypatch):
    """Ranked from weights: the batch, then one statement for what the page shows (no
    candidate's text read for its score); a window whose candidates' texts are not ASCII reads
    them for their scores (and so the page's with them)."""
    acme, _ = seeded
    ascii_only = factories.workspace("initech")
    for i in range(8):
        factories.session(ascii_only, committed=["the plan", "plan the budget", "no"], at=T0 + timedelta(minutes=i))
    logged, (hits, _) = statements_of("budget plan", ascii_only)
    assert len(hits) == 5 and texts_read(logged) == ["connect_search_page"], logged
    logged, (hits, _) = statements_of("café", acme)
    assert hits and texts_read(logged) == ["connect_search_texts"], logged


def test_a_hit_whose_segment_is_gone_before_its_text_is_read_is_left_out(seeded, monkeypatch):
    acme, _ = seeded
    expected, _ = search_transcripts(workspace=acme, query="plan", limit=5)
    read = postgresql.add_page

    def rewritten_meanwhile(window, segments):
        transcript_id, sequence = segments[0]
        Segment.objects.filter(transcript_id=transcript_id, sequence=sequence).delete()
        read(window, segments)

    monkeypatch.setattr(postgresql, "add_page", rewritten_meanwhile)
    hits, _ = search_transcripts(workspace=acme, query="plan", limit=5)
    assert [h.transcript.id for h in hits] == [h.transcript.id for h in expected[1:]]


def test_a_weighted_batch_reads_no_segment(db):
    """EXPLAIN of a weighted batch, one word and three words with ranges or lookups: the index
    by revision only (no segment, transcript or session); the weights come through inlined
    functions."""
    acme = factories.workspace("acme")
    seed(acme, sessions=6)
    for words, ranged in ((["budget"], 0), (["plan", "budget", "review"], 2), (["plan", "budget", "review"], 0)):
        sql, params = postgresql_queries.batch_sql(acme.id, words, None, None, None, None, 128, 4, texts_for=100,
                                                   ranged=ranged, weighted=True)  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
            cursor.execute(f"EXPLAIN VERBOSE {sql}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert not re.search(r"recordings_(segment|transcript|session)\b", plan), plan
        assert "recordings_weight_at" not in plan and re.search(r"\bidx\(", plan), plan  # inlined
