"""A hit's snippet: plain text around the first matching word (docs/api/search.md). Pure: no Django."""

from __future__ import annotations

from apps.recordings.search.terms import WORD, fold

SNIPPET_MAX = 200
ELLIPSIS = "…"


def make_snippet(text: str, terms: list[str], limit: int = SNIPPET_MAX) -> str:
    """Plain text of at most `limit` characters around the first occurrence of any term,
    cut at word boundaries where one is near, with "…" where text was left out."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    keys = {fold(t) for t in terms}
    first = next((m for m in WORD.finditer(text) if fold(m.group()) in keys), None)
    match_start, match_end = (first.start(), first.end()) if first else (0, 0)

    # Some context before the match, the rest after it.
    start = max(0, min(match_start - limit // 4, len(text) - (limit - 1)))
    if start > 0:
        start = _word_start_at_or_after(text, start, match_start)
    lead = ELLIPSIS if start > 0 else ""
    end = start + limit - len(lead)
    if end >= len(text):
        return lead + text[start:]
    end -= len(ELLIPSIS)
    end = _word_end_at_or_before(text, end, max(match_end, start + 1))
    return lead + text[start:end].rstrip() + ELLIPSIS


def _word_start_at_or_after(text: str, i: int, latest: int) -> int:
    """`i` moved forward past a partly cut word, unless that would pass `latest` or go far."""
    if text[i - 1].isspace():
        return i
    space = text.find(" ", i, min(latest, i + 30))
    return space + 1 if space != -1 else i


def _word_end_at_or_before(text: str, end: int, earliest: int) -> int:
    """`end` moved back to the end of a whole word, unless that would cut before `earliest`."""
    if text[end].isspace():
        return end
    space = text.rfind(" ", max(earliest, end - 30), end)
    return space if space != -1 else end
