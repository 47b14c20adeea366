"""The pure parts of search, without a database: the query's words, scoring and ranking,
snippets, windows and cursors (apps/recordings/search/). The behaviour through the API is in
test_search.py, test_search_windows.py and test_search_scale.py."""

from __future__ import annotations

import ast
import random
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from apps.core.cursors import encode_cursor
from apps.core.errors import InvalidRequest
from apps.recordings.search import cursors
from apps.recordings.search.cursors import PageStart, read_cursor, scope_digest
from apps.recordings.search.scoring import RankedHit, rank, segment_score
from apps.recordings.search.snippets import ELLIPSIS, SNIPPET_MAX, make_snippet
from apps.recordings.search.terms import WORD, fold, folded_words, fts5_match, query_keys, query_terms
from apps.recordings.search.windows import CandidateWindow, WindowBounds, common_words_range

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
SEARCH_PACKAGE = Path(__file__).resolve().parents[2] / "apps" / "recordings" / "search"
PURE = {"terms", "scoring", "snippets", "windows", "postgresql_queries"}


@pytest.mark.parametrize("module", sorted(PURE))
def test_pure_modules_import_only_the_standard_library_and_each_other(module):
    tree = ast.parse((SEARCH_PACKAGE / f"{module}.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.module == "apps.recordings.search":  # `from package import module`
                imported |= {f"{node.module}.{alias.name}" for alias in node.names}
            else:
                imported.add(node.module)
    for name in imported:
        top = name.split(".")[0]
        if top == "__future__" or top in sys.stdlib_module_names:
            continue
        assert name.startswith("apps.recordings.search.") and name.split(".")[3] in PURE, (module, name)


# --- Words -------------------------------------------------------------------------------


def test_query_words_are_deduplicated_by_case_keeping_the_first_spelling():
    assert query_terms("Budget budget BUDGET review") == ["Budget", "review"]
    assert query_terms("   ...  --- ") == []


def test_a_decomposed_query_is_one_word_as_its_composed_spelling():
    assert query_terms("Zu\u0308rich") == ["Zürich"]


def test_folding_removes_case_and_accents_as_the_indexes_do():
    assert fold("Zürich") == fold("ZURICH") == "zurich"
    assert fold("Ｃａｆé") == "cafe"  # full-width letters are compatibility forms
    assert folded_words("Zürich, CAFÉ-meeting") == ["zurich", "cafe", "meeting"]
    assert folded_words("Plain ASCII_text") == ["plain", "ascii", "text"]


def test_ascii_words_are_the_word_patterns_matches_casefolded():
    """ASCII text is split without the regex (scoring's cost): the same words as WORD finds."""
    rng = random.Random(24)
    alphabet = [chr(c) for c in range(128)]
    texts = ["", "a", "_", "I'd rather not", "end-of-week, 3.5% (ok?)", "tab\tnew\nline\x1cfs", "ABC_def 123x"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    for text in texts:
        assert folded_words(text) == WORD.findall(text.casefold()), repr(text)


def test_query_keys_are_folded_once_each_in_order():
    assert query_keys(["Café", "budget", "cafe", "CAFÉ"]) == ["cafe", "budget"]


def test_fts5_match_quotes_every_term():
    assert fts5_match(["budget", "NEAR", 'say"what']) == '"budget" AND "NEAR" AND "say""what"'


# --- Scoring and ranking -----------------------------------------------------------------


def test_segment_score_saturates_with_repetition():
    keys = ["budget"]
    one, two, ten = (segment_score(" ".join(["budget"] * n), keys) for n in (1, 2, 10))
    assert one < two < ten < (1.2 + 1) * 1  # bounded by k1 + 1 per word
    assert segment_score("", keys) == 0


def test_a_revision_is_ranked_by_its_best_candidate_segment():
    candidates = {"t1": [0, 1, 2]}
    texts = {("t1", 0): "a long turn that mentions the budget once", ("t1", 1): "budget budget", ("t1", 2): "budget"}
    (hit,) = rank(candidates, texts, {"t1": T0}, ["budget"])
    assert hit.sequence == 1 and hit.score == segment_score("budget budget", ["budget"])


def test_of_equally_good_segments_the_first_is_the_snippet():
    (hit,) = rank({"t1": [3, 5]}, {("t1", 3): "budget", ("t1", 5): "budget"}, {"t1": T0}, ["budget"])
    assert hit.sequence == 3


def test_ranking_is_score_then_session_newest_then_transcript_id():
    created = {"a": T0, "b": T0 + timedelta(minutes=1), "c": T0 + timedelta(minutes=1), "d": T0}
    texts = {("a", 0): "budget budget", ("b", 0): "budget", ("c", 0): "budget", ("d", 0): "budget"}
    ranked = rank({t: [0] for t in "abcd"}, texts, created, ["budget"])
    assert [hit.transcript_id for hit in ranked] == ["a", "c", "b", "d"]


def test_ranking_continues_strictly_after_a_previous_hit():
    created = {t: T0 + timedelta(minutes=i) for i, t in enumerate("abcd")}
    texts = {(t, 0): "budget" for t in "abcd"}
    everything = rank({t: [0] for t in "abcd"}, texts, created, ["budget"])
    after = everything[1][:3]
    assert rank({t: [0] for t in "abcd"}, texts, created, ["budget"], after=after) == everything[2:]


def test_a_revision_rewritten_since_its_candidates_were_found_is_left_out():
    texts = {("kept", 0): "budget", ("gone", 0): "budget"}
    ranked = rank({"kept": [0], "gone": [0], "textless": [0]}, texts, {"kept": T0, "textless": T0}, ["budget"])
    assert ranked == [RankedHit(segment_score("budget", ["budget"]), T0, "kept", 0)]


def test_rank_scores_as_segment_score_does_on_random_text():
    """`rank` inlines `segment_score`: the same scores (to the bit), best segments and order as
    ranking by `segment_score` itself, on random ASCII and accented text, one to three keys."""

    def reference(candidates, texts, created, keys):
        ranked = []
        for tid, sequences in candidates.items():
            scored = [(segment_score(texts[tid, seq], keys), -seq) for seq in sequences if (tid, seq) in texts]
            if scored and tid in created:
                score, best = max(scored)
                ranked.append(RankedHit(score, created[tid], tid, -best))
        return sorted(ranked, reverse=True)

    draw = random.Random(24)
    vocabulary = ["budget", "Budget", "BÜDGET", "review", "réview", "the", "a", "x1", "q_r", "plan", "ok", "ça"]
    for _ in range(300):
        keys = list(dict.fromkeys(fold(w) for w in draw.sample(vocabulary, draw.randint(1, 3))))
        candidates, texts, created = {}, {}, {}
        for t in range(draw.randint(1, 8)):
            tid = f"t{t}"
            candidates[tid] = sorted(draw.sample(range(20), draw.randint(1, 4)))
            for seq in candidates[tid]:
                if draw.random() < 0.9:
                    texts[tid, seq] = " ".join(draw.choice(vocabulary) + draw.choice(["", ",", ".", " -"])
                                               for _ in range(draw.randint(0, 25)))  # fmt: skip
            if draw.random() < 0.95:
                created[tid] = T0 + timedelta(minutes=draw.randint(0, 3))
        assert rank(candidates, texts, created, keys) == reference(candidates, texts, created, keys)


# --- Snippets ----------------------------------------------------------------------------


def test_a_short_text_is_its_own_snippet_with_whitespace_collapsed():
    assert make_snippet("  the   budget\nreview ", ["budget"]) == "the budget review"


def test_a_long_snippet_is_cut_around_the_first_match_at_word_boundaries():
    words = [f"word{i}" for i in range(100)]
    text = " ".join(words[:50] + ["Zürich"] + words[50:])
    snippet = make_snippet(text, ["zurich"])
    assert len(snippet) <= SNIPPET_MAX and "Zürich" in snippet
    assert snippet.startswith(ELLIPSIS) and snippet.endswith(ELLIPSIS)
    assert all(word in text.split() for word in snippet.strip(ELLIPSIS).split())


def test_a_long_text_without_a_match_starts_at_its_beginning():
    text = " ".join(f"word{i}" for i in range(100))
    snippet = make_snippet(text, ["absent"])
    assert snippet.startswith("word0 word1") and snippet.endswith(ELLIPSIS) and len(snippet) <= SNIPPET_MAX


# --- Windows -----------------------------------------------------------------------------


def test_common_words_ranges_shrink_beyond_four_words_down_to_the_sample():
    assert [common_words_range(["w"] * n) for n in (2, 4, 5, 8, 100)] == [100, 100, 80, 50, 8]


def test_a_window_found_again_keeps_what_was_known_past_its_end():
    shown = WindowBounds(first=10, last=20, more=True)
    assert CandidateWindow({}, first=10, last=20, more=False).settle(shown).more is True
    assert CandidateWindow({}, first=10, last=15, more=False).settle(shown).more is False
    assert CandidateWindow({}, first=1, last=2, more=True).settle(None).bounds() == WindowBounds(1, 2, True)


# --- Cursors -----------------------------------------------------------------------------


def test_the_scope_digest_ignores_word_order_and_case_but_not_words_or_filter():
    assert scope_digest(["Budget", "review"], None) == scope_digest(["review", "budget"], None)
    assert scope_digest(["budget"], None) != scope_digest(["budget", "review"], None)
    assert scope_digest(["budget"], None) != scope_digest(["budget"], "final")


@pytest.mark.parametrize("vendor, position", [("sqlite", 7 << 44), ("postgresql", (T0, "tr_1"))])
def test_cursors_round_trip_for_each_engine(vendor, position):
    digest = scope_digest(["budget"], None)
    after_next = read_cursor("ws_1", cursors.next_window_cursor("ws_1", digest, position), digest, vendor)
    assert after_next == PageStart(window_from=position)
    shown = WindowBounds(position, None, False)
    hit = RankedHit(1.25, T0 + timedelta(microseconds=7), "tr_2", 3)
    in_window = read_cursor("ws_1", cursors.same_window_cursor("ws_1", digest, shown, hit), digest, vendor)
    assert in_window == PageStart(shown=shown, after=(1.25, hit.session_created, "tr_2"))


def test_a_cursor_is_bound_to_its_workspace_words_and_filter():
    digest = scope_digest(["budget"], None)
    cursor = cursors.next_window_cursor("ws_1", digest, 5)
    for workspace_id, other in (("ws_2", digest), ("ws_1", scope_digest(["budget"], "final"))):
        with pytest.raises(InvalidRequest):
            read_cursor(workspace_id, cursor, other, "sqlite")


@pytest.mark.parametrize("position", [True, -1, "5", 1.5, [1, 2]])
def test_a_well_signed_cursor_with_a_bad_sqlite_position_is_invalid(position):
    digest = scope_digest(["budget"], None)
    cursor = encode_cursor("search", "ws_1", ["next", digest, position])
    with pytest.raises(InvalidRequest):
        read_cursor("ws_1", cursor, digest, "sqlite")


@pytest.mark.parametrize("position", [5, ["not a time", "t"], [T0.isoformat(), 5], [T0.isoformat()]])
def test_a_well_signed_cursor_with_a_bad_postgresql_position_is_invalid(position):
    digest = scope_digest(["budget"], None)
    cursor = encode_cursor("search", "ws_1", ["next", digest, position])
    with pytest.raises(InvalidRequest):
        read_cursor("ws_1", cursor, digest, "postgresql")
