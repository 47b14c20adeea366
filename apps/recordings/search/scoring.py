"""How the revisions of one window are ranked. Pure: no Django, no database.

A candidate segment is scored from its own text (BM25's term-frequency part), so both
databases score alike and a score never depends on other segments, revisions or workspaces. A
revision is scored by its best candidate segment, and a window's revisions are ordered by score,
then session newest first, then transcript id: a total order, so a cursor can continue after
any hit.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from apps.recordings.search.terms import folded_words

# BM25's term-frequency saturation and length normalisation. No inverse document frequency:
# every word must occur in every hit, and corpus statistics would make the cost and the
# order depend on other workspaces' data.
K1, B, AVERAGE_WORDS = 1.2, 0.75, 12.0


def segment_score(text: str, keys: list[str]) -> float:
    """How well one segment matches the folded query words `keys`; higher is better."""
    words = folded_words(text)
    return counted_score(len(words), [words.count(key) for key in keys])


def counted_score(length: int, occurrences: list[int]) -> float:
    """`segment_score` of a segment of `length` words in which the query's keys occur
    `occurrences` times, in the keys' order (as an index that kept the counts gives them)."""
    norm = K1 * (1 - B + B * length / AVERAGE_WORDS)
    score = 0.0
    for tf in occurrences:
        score += tf * (K1 + 1) / (tf + norm)
    return score


class RankedHit(NamedTuple):
    """A revision's place in its window's ranking, and the segment whose snippet it shows.

    The first three fields are the ranking key a cursor continues after; `sequence` is the
    candidate segment that scored best."""

    score: float
    session_created: datetime
    transcript_id: str
    sequence: int


RankKey = tuple[float, datetime, str]


def rank(
    candidates: dict[str, list[int]],
    texts: dict[tuple[str, int], str],
    session_created: dict[str, datetime],
    keys: list[str],
    after: RankKey | None = None,
    scores: dict[tuple[str, int], float] | None = None,
) -> list[RankedHit]:
    """The candidate revisions (transcript id: candidate sequences) best first, each scored by
    its best candidate segment (of equal ones, the first); only those ranked after `after`
    when given. A candidate's score is in `scores` when its engine knew it (`counted_score`),
    else scored from its text. A revision whose texts or session time are missing (rewritten
    since its candidates were found) is left out rather than failing the page. The best
    segment is kept as the loop goes (no list of scores per revision): a window scores up to
    400 segments."""
    ranked = []
    get_text, known = texts.get, (scores or {}).get
    for transcript_id, sequences in candidates.items():
        best_score, best_sequence = None, None
        for sequence in sequences:
            score = known((transcript_id, sequence))
            if score is None:
                text = get_text((transcript_id, sequence))
                if text is None:
                    continue
                score = segment_score(text, keys)
            if best_score is None or score > best_score or (score == best_score and sequence < best_sequence):
                best_score, best_sequence = score, sequence
        if best_score is not None and transcript_id in session_created:
            ranked.append(RankedHit(best_score, session_created[transcript_id], transcript_id, best_sequence))
    ranked.sort(reverse=True)
    if after is not None:
        ranked = [hit for hit in ranked if hit[:3] < after]
    return ranked
