"""Where a search by meaning's CPU goes, for bench/semantic.py: `query_cost` (the question's
vector alone: `encode` against the model's own modules, one torch thread against two) and
`cpu_parts` (one search through Django's full request path, in this process, split by part).

CPU, not latency: `time.process_time()` counts every thread of this process (torch's intra-op
threads included), so a figure is what a request costs the machine, which a loaded machine
disturbs far less than it disturbs a latency. PostgreSQL's own CPU (the backend serving this
process) is read from /proc beside it."""

from __future__ import annotations

import statistics
import time

QUESTIONS_PER_ROUND = 20


def distinct_questions(count: int, questions: list[str], salt: str = "") -> list[str]:
    """`count` questions, none the same text: the labelled set's and `questions` (the
    benchmark's) with a number after them (one to three more word pieces), so no cache can
    answer them."""
    from tests.recordings.semantic_set import QUESTIONS as LABELLED

    base = questions + [q for q, _ in LABELLED]
    return [f"{base[n % len(base)]} {salt}{n}" for n in range(count)]


def query_cost(rounds: int, questions: list[str]) -> dict:
    """The question's vector, one question at a time: `encode([text])` (before), the model's
    own modules under inference_mode (`MiniLM.query`, now) and the raw transformer with mean
    pooling written out, at one torch thread and at two; CPU and wall per question, the ways
    taken in turn question by question, the thread counts in alternating blocks. The vectors of
    every way are compared with encode's."""
    import numpy as np
    import torch

    from apps.recordings.semantic.embedders import current
    from apps.recordings.semantic.vectors import unit

    embedder = current()
    st = embedder.model
    tokenizer, transformer = st.tokenizer, st[0].auto_model

    def raw(text: str) -> np.ndarray:  # the model card's way: tokenizer, forward, mean pooling, normalise
        batch = tokenizer([text], padding=True, truncation=True, max_length=st.max_seq_length, return_tensors="pt")
        with torch.inference_mode():
            tokens = transformer(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return unit(pooled[0].numpy())

    ways = {"encode([text]) (before)": lambda t: embedder.passages([t])[0],
            "modules under inference_mode (MiniLM.query)": embedder.query,
            "raw transformer + mean pooling": raw}  # fmt: skip
    questions = distinct_questions(QUESTIONS_PER_ROUND * rounds, questions)
    differences = {name: 0.0 for name in ways}
    for text in questions[:QUESTIONS_PER_ROUND] + ["x " * 400]:  # and one past the model's 256 tokens
        reference = ways["encode([text]) (before)"](text)
        for name, way in ways.items():
            differences[name] = max(differences[name], float(np.abs(way(text) - reference).max()))
    cpu: dict[tuple[str, int], list[float]] = {}
    wall: dict[tuple[str, int], list[float]] = {}
    before = torch.get_num_threads()
    try:
        for round_ in range(rounds):
            for threads in (1, 2) if round_ % 2 == 0 else (2, 1):
                torch.set_num_threads(threads)
                for way in ways.values():  # warm at this thread count
                    way("warm up")
                for text in questions[round_ * QUESTIONS_PER_ROUND : (round_ + 1) * QUESTIONS_PER_ROUND]:
                    for name, way in ways.items():
                        c, w = time.process_time(), time.perf_counter()
                        way(text)
                        cpu.setdefault((name, threads), []).append(1000 * (time.process_time() - c))
                        wall.setdefault((name, threads), []).append(1000 * (time.perf_counter() - w))
    finally:
        torch.set_num_threads(before)
    base = statistics.median(cpu[("encode([text]) (before)", 1)])
    return {
        "questions": len(questions), "load average": round(_load(), 1),
        "largest difference from encode's vector": {n: f"{d:.1e}" for n, d in differences.items()},
        **{f"{name} @ {threads} thread{'s' * (threads > 1)}": {
            "CPU ms p50": round(statistics.median(cpu[name, threads]), 2),
            "wall ms p50": round(statistics.median(wall[name, threads]), 2),
            "CPU ÷ encode @ 1 thread": round(statistics.median(cpu[name, threads]) / base, 3)}
           for name, threads in cpu},
    }  # fmt: skip


def _load() -> float:
    import os

    return os.getloadavg()[0]


class _Parts:
    """CPU seconds (process_time) spent inside each wrapped function, by part name; a wrapped
    function called inside another wrapped one is charged to the inner part only."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._depth: list[float] = []

    def wrap(self, module, attribute: str, part: str) -> None:
        inner = getattr(module, attribute)

        def wrapped(*args, **kwargs):
            started = time.process_time()
            self._depth.append(0.0)
            try:
                return inner(*args, **kwargs)
            finally:
                nested = self._depth.pop()
                elapsed = time.process_time() - started
                self.spent[part] = self.spent.get(part, 0.0) + elapsed - nested
                if self._depth:
                    self._depth[-1] += elapsed

        setattr(module, attribute, wrapped)


def cpu_parts(rounds: int, questions: list[str], sessions_list: str,
              modes: tuple[str, ...] = ("semantic", "hybrid")) -> dict:
    """One search at a time through Django's whole request path (test client: middleware, key
    check, validation, view, JSON), workspace `big`, warm, every question a distinct text (the
    question cache misses, as the load's questions do): CPU per request by part — the question's
    vector, the scan (int8 dots, the k best, rescoring), the database reads (new rows' probe,
    read back, hits, and for hybrid the keyword list), the JSON encoding, the rest — beside the
    sessions list's (limit=100) whole CPU per request, alternating request by request. On
    PostgreSQL the backend's CPU per request too."""
    import urllib.parse

    from django.db import connection
    from django.test import Client

    import apps.recordings.api as api
    import apps.recordings.search.semantic as semantic
    from apps.recordings.semantic import embedders, index
    from apps.tenancy.models import Workspace
    from bench import harness

    parts = _Parts()
    parts.wrap(embedders, "query_vector", "question vector")
    parts.wrap(index, "_ranked_rows", "scan")
    parts.wrap(index, "_read_new", "reads: newest id probe (new rows)")
    parts.wrap(semantic, "_read_back", "reads: nearest rows read back")
    parts.wrap(semantic, "_hits", "reads: the page's hits")
    parts.wrap(semantic, "search_transcripts", "keyword list (hybrid)")
    parts.wrap(api, "json_response", "JSON encoding")
    email = f"bench-cpu-{time.time_ns()}@example.invalid"
    key = harness.read_key(Workspace.objects.get(slug="big"), email, "bench-cpu")
    client = Client(headers={"Authorization": f"Bearer {key}"})
    postgres = connection.vendor == "postgresql"

    def backend() -> float:
        with connection.cursor() as cursor:
            return harness.backend_cpu(cursor) if postgres else 0.0

    def url(text: str, mode: str) -> str:  # each mode its own text: no request hits the question cache
        return "/api/v1/transcripts/search?" + urllib.parse.urlencode({"query": f"{text} {mode}", "mode": mode})

    for mode in modes:  # warm: the model, the workspace's vectors, the key
        assert client.get(url("warm up", mode)).status_code == 200
    assert client.get(sessions_list).status_code == 200
    questions = distinct_questions(QUESTIONS_PER_ROUND * rounds, questions, salt="cpu")
    totals: dict[str, list[float]] = {}
    by_part: dict[str, dict[str, float]] = {mode: {} for mode in modes}
    db_cpu: dict[str, float] = {}
    counts: dict[str, int] = {}
    for text in questions:
        for name, path in [*((mode, url(text, mode)) for mode in modes), ("sessions list", sessions_list)]:
            parts.spent = {}
            db_before, started = backend(), time.process_time()
            response = client.get(path)
            total = time.process_time() - started
            db_cpu[name] = db_cpu.get(name, 0.0) + backend() - db_before
            assert response.status_code == 200, response.content[:200]
            totals.setdefault(name, []).append(total)
            counts[name] = counts.get(name, 0) + 1
            if name in by_part:
                for part, spent in parts.spent.items():
                    by_part[name][part] = by_part[name].get(part, 0.0) + spent
                by_part[name]["rest (request path, view, grouping)"] = (
                    by_part[name].get("rest (request path, view, grouping)", 0.0) + total - sum(parts.spent.values()))
    listing = statistics.mean(totals["sessions list"])
    out: dict = {"requests each": len(questions), "load average": round(_load(), 1), "db": connection.vendor}
    for name in totals:
        mean = statistics.mean(totals[name])
        figures = {"CPU ms mean": round(1000 * mean, 2), "CPU ms p50": round(1000 * statistics.median(totals[name]), 2),
                   "÷ sessions list": round(mean / listing, 2)}  # fmt: skip
        if postgres:
            figures["PostgreSQL backend CPU ms mean"] = round(1000 * db_cpu[name] / counts[name], 2)
        if name in by_part:
            figures["by part, CPU ms mean"] = {p: round(1000 * s / counts[name], 2) for p, s in by_part[name].items()}
        out[name] = figures
    return out
