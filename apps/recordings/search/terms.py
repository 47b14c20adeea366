"""The words of a search query and how they are compared with text. Pure: no Django.

A query is a list of words; everything else in it (quotes, operators, punctuation) is a
separator, never syntax, so user input cannot become full-text query syntax on either database.
Words are folded (case and accents) the way both indexes fold them, so a word found through
the index is also found again when a candidate's text is scored and its snippet cut.
"""

from __future__ import annotations

import re
import unicodedata

# Letters and digits of any script; the same classes FTS5's unicode61 tokenizer keeps (L*, N*),
# so a term is never something the index would have split in two.
WORD = re.compile(r"[^\W_]+")


def query_terms(query: str) -> list[str]:
    """The words of a user's query, deduplicated case-insensitively, in order. Everything else
    (quotes, operators, punctuation) is a separator, never syntax. Accents are left to the
    index, which folds them on both databases (FTS5 remove_diacritics, PostgreSQL unaccent)."""
    terms: dict[str, str] = {}
    for word in WORD.findall(unicodedata.normalize("NFC", query)):
        terms.setdefault(word.casefold(), word)
    return list(terms.values())


def fold(word: str) -> str:
    """`word` without case or accents, as both indexes compare words."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


# ASCII text folded and split in one pass: letters lowercased, every other character that is not
# a letter or a digit made a space (as WORD sees them: `_` and punctuation separate words).
_ASCII_WORDS = str.maketrans(
    {c: chr(c).lower() if chr(c).isalnum() else " " for c in range(128)}
)


def folded_words(text: str) -> list[str]:
    """Every word of `text`, folded. ASCII text has no accents to remove: its words are WORD's
    matches, casefolded, found without the regex (a third of its cost, per candidate text
    scored: tests/recordings/test_search_units.py compares the two)."""
    if text.isascii():
        return text.translate(_ASCII_WORDS).split()
    text = text.casefold()
    return WORD.findall(text if text.isascii() else fold(text))


def query_keys(terms: list[str]) -> list[str]:
    """The query's words as a text's folded words are compared with them: folded, each once, in order."""
    return list(dict.fromkeys(fold(t) for t in terms))


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression requiring every term. Each term is a double-quoted string, so
    AND/OR/NOT/NEAR, `*`, `^`, `:`, `-` and parentheses in it are plain text."""
    return " AND ".join('"' + term.replace('"', '""') + '"' for term in terms)
