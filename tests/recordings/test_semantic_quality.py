"""Search by meaning is worth its cost: on the labelled set (tests/recordings/semantic_set.py),
hybrid's recall@10 and nDCG@10 are at least keyword search's. bench/semantic.py prints the same
figures for the three modes (bench/README.md)."""

from __future__ import annotations

import math

from tests import factories
from tests.recordings.semantic_set import MEETINGS, QUESTIONS, embed_everything, needs_extra, semantic_on  # noqa: F401

SEARCH = "/api/v1/transcripts/search"
K = 10


def load_set(workspace) -> dict[str, str]:
    """The labelled meetings as committed revisions; session id: meeting title."""
    return {factories.session(workspace, label=title, committed=lines).id: title for title, lines in MEETINGS.items()}


def scores(ranked: list[tuple[str, int]], relevant: set[tuple[str, int]]) -> tuple[float, float]:
    """(recall@K, nDCG@K) of a ranked list of (meeting, sequence) with binary relevance."""
    top = ranked[:K]
    recall = len(relevant & set(top)) / len(relevant)
    dcg = sum(1 / math.log2(i + 2) for i, hit in enumerate(top) if hit in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), K)))
    return recall, dcg / ideal


def evaluate(search, titles: dict[str, str]) -> dict[str, tuple[float, float]]:
    """Mean (recall@K, nDCG@K) per mode; `search(query, mode)` returns the hits (wire form)."""
    figures = {}
    for mode in ("keyword", "semantic", "hybrid"):
        per_question = []
        for question, answers in QUESTIONS:
            hits = search(question, mode)
            ranked = [(titles[h["session"]["id"]], h["sequence"]) for h in hits]
            per_question.append(scores(ranked, set(answers)))
        figures[mode] = tuple(sum(values) / len(values) for values in zip(*per_question))
    return figures


@needs_extra
def test_hybrid_is_at_least_as_good_as_keyword_on_the_labelled_set(api, acme, alice_key, semantic_on):
    titles = load_set(acme)
    embed_everything()

    def search(query: str, mode: str) -> list[dict]:
        response = api.get(SEARCH, alice_key, query=query, mode=mode, limit=K)
        assert response.status_code == 200, response.content
        return response.json()["items"]

    figures = evaluate(search, titles)
    keyword, hybrid = figures["keyword"], figures["hybrid"]
    assert hybrid[0] >= keyword[0], figures  # recall@10
    assert hybrid[1] >= keyword[1], figures  # nDCG@10
    # The set is one the model must get mostly right, so a broken embedder fails here too.
    assert figures["semantic"][0] >= 0.5, figures
    print(figures)
