"""The PostgreSQL engine: a window's candidates from the index by revision (migration 0005).

`recordings_revisionword` holds one row per (revision, word) with the sequences of the
revision's segments that contain the word, in a btree that reads "the newest revisions
containing this word" as one index range in order. A window is found by reading the query's
rarest word's range in batches and keeping the revisions whose other words' rows share a
sequence with it: those segments hold every word. So a query costs the revisions it reads, never
a whole posting list, whatever its words' frequencies; a window reads at most MAX_SCANNED
revisions of the rarest word (`max_revisions_read`), and a page can then be short or empty,
with a cursor, as on SQLite. A window is ranked from the weights the index keeps (migration
0008), so only the page's hits read their texts; a revision with an unknown weight is scored
from its text, to the same score. Every statement is prepared once per connection
(engine/postgresql/prepared.py `run`). How each step reads the index, and why:
docs/decisions/search.md, the "PostgreSQL search" sections."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection

from engine.postgresql import prepared

import apps.recordings.search.windows as windows
import apps.recordings.search.postgresql_queries as queries
from apps.recordings.search.postgresql_queries import (
    OTHER_WORD_SQL, PAGE_SQL, TEXTS_SQL, WORDS_SQL, batch_sql,
)  # fmt: skip
from apps.recordings.search.scoring import counted_score
from apps.recordings.search.terms import query_keys
from apps.recordings.search.windows import CandidateWindow, HitSession, HitTranscript, WindowBounds

FIRST_BATCH = 128  # revisions of the rarest word read first (of a query of one word: a window's and one); each next batch twice as many
MAX_SCANNED = 400  # revisions of the rarest word one window of up to SCANNED_WORDS words reads at most
SCANNED_WORDS = 3  # longer queries read proportionally fewer revisions (never fewer than FIRST_BATCH)
COUNT_CAP = 500  # a word's revisions are counted up to this many (which word is rarest)
RANGE_RATIO = 4  # a word at most this many times as frequent as the rarest is read as a range beside it
WEIGHTED = True  # rank from the index's weights where they are known (tests turn it off to compare)
# A weight (migration 0008): the segment's word count << OCCURRENCE_BITS | the word's occurrences.
OCCURRENCE_BITS = 10

def rarest_first(db, terms: list[str], workspace_id: Any) -> list[str] | None:
    """The query's words, rarest first; None when one of them is in none of the workspace's
    revisions (or the query has no word the index keeps): then nothing matches."""
    counted = counted_rarest_first(db, terms, workspace_id)
    return None if counted is None else [word for word, _ in counted]


def counted_rarest_first(db, terms: list[str], workspace_id: Any) -> list[tuple[str, int]] | None:
    """`rarest_first`, each word with its count of revisions (up to COUNT_CAP). The words a
    text of one term gives are remembered (`one_word`)."""
    text = " ".join(terms)
    prepared.run(db, "connect_search_words", WORDS_SQL, [workspace_id, COUNT_CAP, text])
    counted = db.fetchall()
    if len(terms) == 1:
        if len(_ONE_TERM_WORDS) >= ONE_TERM_WORDS_KEPT:
            _ONE_TERM_WORDS.clear()
        _ONE_TERM_WORDS[text] = tuple(word for word, _ in counted)
    if not counted or any(count == 0 for _, count in counted):
        return None
    return sorted(counted, key=lambda wc: (wc[1], wc[0]))


# The words (lexemes) the index keeps of a query of one term, by the term: the text search
# configuration makes them from the text alone, so they are the same every time.
ONE_TERM_WORDS_KEPT = 4096
_ONE_TERM_WORDS: dict[str, tuple[str, ...]] = {}


def one_word(terms: list[str]) -> str | None:
    """The one word of a query of one term, when it is known to make one word: such a query
    needs no counting (its word leads, and a batch that reads no revision of it finds that
    nothing matches, as a count of 0 would have said)."""
    if len(terms) != 1:
        return None
    words = _ONE_TERM_WORDS.get(terms[0])
    return words[0] if words is not None and len(words) == 1 else None


def ranged_words(counted: list[tuple[str, int]]) -> int:
    """How many of the words after the rarest a batch reads as ranges beside the rarest's
    (`queries.ranged_source`) rather than by one lookup per revision: those at most
    RANGE_RATIO times as frequent as it (words of COUNT_CAP revisions or more count as equal;
    a range stops at its bound anyway). The counts are ascending, so they are the first ones."""
    lead = counted[0][1]
    return sum(1 for _, count in counted[1:] if count <= RANGE_RATIO * lead)


def find_window(
    terms: list[str], workspace_id: Any, revision_kind: str | None, start: Any, shown: WindowBounds | None
) -> CandidateWindow:
    """The window from after `start` ((created_at, transcript id); None = the newest revision),
    or the window `shown` again."""
    max_revisions, per_revision = windows.CANDIDATE_REVISIONS, windows.CANDIDATE_SEGMENTS
    through, down_to = (shown.first, shown.last) if shown else (None, None)
    window = CandidateWindow({})
    unchanged = (shown.last, shown.more) if shown else (None, False)
    with connection.cursor() as db:
        if (word := one_word(terms)) is not None:
            words, ranged = [word], 0
        elif (counted := counted_rarest_first(db, terms, workspace_id)) is None:
            window.last, window.more = unchanged
            return window.settle(shown)
        else:
            words, ranged = [word for word, _ in counted], ranged_words(counted)
        matched: list[tuple[str, int, list[int]]] = []  # (transcript id, created_at in µs, sequences)
        unweighed: set[str] = set()  # matched revisions scored from their texts (a weight unknown)
        max_scanned = max_revisions_read(len(words))
        # One word: every revision read matches, so the window's and one more (is there more?).
        first = max_revisions + 1 if len(words) == 1 else FIRST_BATCH
        resume, scanned, batch, oldest, exhausted = start, 0, min(first, max_scanned), None, False
        in_batch = len(words) <= queries.SQL_WORDS  # the batch reads its matches' texts (or weights) itself
        keys = query_keys(terms)
        # The weights count the index's words: they score the query when its keys are those words.
        weighted = WEIGHTED and in_batch and sorted(keys) == sorted(words)
        order, scored = [words.index(key) for key in keys] if weighted else [], {}
        while True:
            prepared.run(db, None, *batch_sql(workspace_id, words, revision_kind, resume, through, down_to, batch,
                                              per_revision, texts_for=max_revisions - len(matched),
                                              ranged=ranged, weighted=weighted))  # fmt: skip
            rows = db.fetchall()
            # A weighted batch returns its matches and its last revision, and how many it read.
            read = (rows[0][-1] if rows else 0) if weighted else len(rows)
            scanned += read
            alive = {row[0]: row[2] for row in rows if row[2]}
            for word in words[queries.SQL_WORDS:]:  # beyond those the batch intersected
                if not alive:
                    break
                prepared.run(db, "connect_search_other_word", OTHER_WORD_SQL, [array_literal(list(alive)), word])
                found = dict(db.fetchall())
                alive = {tid: kept for tid, sequences in alive.items() if tid in found
                         for also in [set(found[tid])] if (kept := [s for s in sequences if s in also])}  # fmt: skip
            matched += [(row[0], row[1], alive[row[0]][:per_revision]) for row in rows if row[0] in alive]
            if weighted:
                unweighed |= _add_weighed(window, rows, order, scored)
            elif in_batch:
                for transcript_id, _, _, *hit in rows:
                    _add_hit(window, transcript_id, hit)
            if rows:
                oldest = (instant(rows[-1][1]), rows[-1][0])
            if len(matched) > max_revisions:
                break
            if read < batch:
                exhausted = True  # no older revisions contain the word (in a window shown: none left in it)
                break
            if scanned >= max_scanned:
                break
            resume, batch = oldest, min(2 * batch, max_scanned - scanned)
        if not in_batch or unweighed:
            _add_texts(db, [m for m in matched[:max_revisions] if not in_batch or m[0] in unweighed], window)
        for transcript_id, _, sequences in matched[:max_revisions]:
            window.candidates[transcript_id] = sequences
    if len(matched) > max_revisions:
        window.last, window.more = window_position(matched[max_revisions - 1]), True
    elif exhausted:
        window.last, window.more = unchanged
    else:
        # The bound on revisions read: the next window starts past the oldest one read.
        window.last, window.more = oldest, True
    if matched:
        window.first = window_position(matched[0])
    return window.settle(shown)


def max_revisions_read(words: int) -> int:
    """How many revisions of the rarest word a window of a query of `words` words reads at most:
    every word's row of each is read, so the bound is on revisions times words."""
    return min(MAX_SCANNED, max(FIRST_BATCH, MAX_SCANNED * SCANNED_WORDS // max(1, words)))


def window_position(match: tuple[str, int, list[int]]) -> tuple[datetime, str]:
    transcript_id, created_us, _ = match
    return (instant(created_us), transcript_id)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def instant(microseconds: int | None) -> datetime | None:
    """A timestamp the queries read as microseconds since the epoch (`queries.epoch_us`), as the
    ORM returns it (aware, UTC): exact, and a fraction of the cost of a timestamptz column
    through Django's loader, which parses each in Python."""
    return None if microseconds is None else EPOCH + timedelta(microseconds=microseconds)


def array_literal(values: list[str] | list[int]) -> str:
    """A PostgreSQL array literal of `values`, sent as one text parameter (the SQL casts it):
    the client-side binding Django uses would quote each element in Python."""
    return "{" + ",".join('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def _add_texts(db, matched: list[tuple[str, int, list[int]]], window: CandidateWindow) -> None:
    """What the window needs of the matched revisions (newest first), for a query whose batches
    did not read it (`queries.TEXTS_SQL`)."""
    if matched:
        prepared.run(db, "connect_search_texts", TEXTS_SQL, [array_literal([tid for tid, _, _ in matched]),
                               array_literal([array_literal(sequences) for _, _, sequences in matched])])  # fmt: skip
        for transcript_id, *hit in db.fetchall():
            _add_hit(window, transcript_id, hit)


def _add_hit(window: CandidateWindow, transcript_id: str, hit: list[Any]) -> None:
    """A matched revision's HIT_COLUMNS into the window: its candidate segments' texts and
    starts, and what a hit shows of it and its session (nothing when they were not read, or
    the revision or its segments are gone since)."""
    *revision, sequences, texts, starts = hit
    if revision[0] is None or sequences is None:
        return
    _add_revision(window, transcript_id, revision)
    for sequence, text, start in zip(sequences, texts, starts):
        window.texts[transcript_id, sequence] = text
        window.starts[transcript_id, sequence] = start


def _add_revision(window: CandidateWindow, transcript_id: str, revision: list[Any]) -> None:
    """A matched revision's REVISION_COLUMNS into the window: what a hit shows of it and its session."""
    kind, session_id, label, status, started, ended, created = revision
    session = HitSession(session_id, label, status, instant(started), instant(ended), instant(created))
    window.revisions[transcript_id] = (HitTranscript(transcript_id, kind), session)
    window.created[transcript_id] = session.created_at


def _add_weighed(window: CandidateWindow, rows: list[tuple], order: list[int], scored: dict[Any, float]) -> set[str]:
    """A weighted batch's rows into the window: each matched revision's session created_at
    and its candidates' scores from their weights (the row's last column: for each candidate
    in turn, each word's in the batch's order; `order`: the query's keys' places among the
    words). `scored` holds the scores of the weights seen so far: most candidates share theirs
    with others. Returns the revisions with an unknown weight: they are scored from their texts."""
    words, mask, unweighed = len(order), (1 << OCCURRENCE_BITS) - 1, set()
    for transcript_id, _, shared, session_created, weights, _ in rows:
        if weights is None or not shared:
            continue  # not a match, or not one the window takes
        window.created[transcript_id] = instant(session_created)
        for i, sequence in enumerate(shared):
            at = weights[i] if words == 1 else tuple(weights[i * words : (i + 1) * words])
            score = scored.get(at)
            if score is None:
                each = (at,) if words == 1 else at
                if None in each or min(each) < 0:
                    unweighed.add(transcript_id)
                    break
                score = scored[at] = counted_score(each[0] >> OCCURRENCE_BITS, [each[k] & mask for k in order])
            window.scores[transcript_id, sequence] = score
    return unweighed


def add_page(window: CandidateWindow, segments: list[tuple[str, int]]) -> None:
    """What the page's hits show that a window ranked from weights did not read (`PAGE_SQL`):
    their segments' texts and starts ((transcript id, sequence) pairs), their revisions and
    sessions; nothing for one that is gone since."""
    with connection.cursor() as db:
        prepared.run(db, "connect_search_page", PAGE_SQL,
                     [array_literal([t for t, _ in segments]), array_literal([s for _, s in segments])])  # fmt: skip
        for transcript_id, sequence, text, start, *revision in db.fetchall():
            window.texts[transcript_id, sequence] = text
            window.starts[transcript_id, sequence] = start
            if revision[0] is not None:
                _add_revision(window, transcript_id, revision)
