"""The question's vector (apps/recordings/semantic/embedders.py): `MiniLM.query` (the model's
own modules, without `encode`) gives encode's vector, and a process's cache of question vectors
spares the model for the next page and a question asked again, never for another model, and
counts what it spared (the metrics a benchmark reads its hit rate from)."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from tests import factories
from tests.recordings.semantic_set import embed_everything, needs_extra, semantic_on  # noqa: F401
from tests.recordings.test_semantic_api import BUDGET, OTHER, get

pytestmark = needs_extra


def counted() -> tuple[float, float]:
    """(question vectors asked for, computed by the model) so far in this process."""
    return (REGISTRY.get_sample_value("connect_semantic_query_vectors_total") or 0.0,
            REGISTRY.get_sample_value("connect_semantic_query_vectors_computed_total") or 0.0)  # fmt: skip


def test_query_gives_encodes_vector_for_short_long_and_unusual_questions(semantic_on):
    import numpy as np

    from apps.recordings.semantic.embedders import current

    embedder = current()
    questions = ["What did we decide about the budget?", "budget", "Qui s'occupe du déploiement ? 😀",
                 "x " * 400]  # the last is past the model's 256 tokens: cut as encode cuts it  # fmt: skip
    for question in questions:
        vector = embedder.query(question)
        assert vector.shape == (embedder.dimensions,) and vector.dtype == np.float32
        assert np.abs(vector - embedder.passages([question])[0]).max() <= 1e-5
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_the_next_page_and_a_repeated_question_reuse_the_vector_and_another_model_does_not(
    api, acme, alice_key, semantic_on, monkeypatch
):
    from apps.recordings.semantic import embedders

    embedders.forget_queries()
    for n in range(3):
        factories.session(acme, label=f"s{n}", committed=[*BUDGET, *OTHER])
    embed_everything()
    question = "What did we decide about the budget?"
    asked, computed = counted()
    first = get(api, alice_key, query=question, mode="semantic", limit=1)
    assert counted() == (asked + 1, computed + 1)
    second = get(api, alice_key, query=question, mode="semantic", limit=1, cursor=first["nextCursor"])
    assert second["items"] and second["items"][0]["transcriptId"] != first["items"][0]["transcriptId"]
    get(api, alice_key, query=question, mode="hybrid")
    assert counted() == (asked + 3, computed + 1)
    # Another text is another question; the cached vector is the model's own and read-only.
    get(api, alice_key, query=question + " ", mode="semantic")
    assert counted() == (asked + 4, computed + 2)
    vector = embedders.query_vector(question)
    assert not vector.flags.writeable
    assert abs(vector - embedders.current().query(question)).max() <= 1e-6
    # A new model (a new name) never gets another model's vector.
    monkeypatch.setattr(embedders.current(), "name", embedders.current().name + "+next")
    embedders.query_vector(question)
    assert counted()[1] == computed + 3

