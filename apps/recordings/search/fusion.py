"""Reciprocal-rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009): one ranked list from
several, each item scored sum(1 / (K + rank)) over the lists that hold it (rank from 1). Ranks,
not scores, are fused, so a keyword score and a cosine need no common scale; the same code for
both databases. Pure: no Django."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

K = 60  # the paper's constant: a list's first places count for much, its tail for little


def fuse(*lists: Sequence[Hashable], k: int = K) -> list[tuple[Hashable, float]]:
    """Items of `lists` (each best first, without repeats) by fused score, best first; ties
    keep the order in which items were first met (the first list's order first)."""
    scores: dict[Hashable, float] = {}
    for ranked in lists:
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])
