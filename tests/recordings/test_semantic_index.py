"""The nearest vectors (apps/recordings/semantic/index.py): the int8 scan returns what the exact
float ranking returns, with exact cosines; a process's cache sees vectors written since its
load at once, never returns one found deleted, and its periodic check of ids drops deleted rows
and reads rows committed below the last id it read."""

from __future__ import annotations

import itertools

import pytest

from apps.recordings.models import SegmentEmbedding
from apps.recordings.semantic import installed
from tests.recordings.semantic_set import needs_extra

pytestmark = needs_extra

if installed():  # numpy and numkong: the extra's (requirements/semantic.txt)
    import numpy as np

    from apps.recordings.semantic import index
    from apps.recordings.semantic.vectors import quantize, unit

MODEL = "test-model@1"
DIMENSIONS = 384


def clustered(rng, rows: int, topics: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """(rows near `topics` random directions, the directions): unit vectors, as embeddings of
    meetings about a few subjects are."""
    centers = unit(rng.standard_normal((topics, DIMENSIONS)))
    return unit(centers[rng.integers(topics, size=rows)] + 0.05 * rng.standard_normal((rows, DIMENSIONS))), centers


def lengths_of(codes: np.ndarray) -> np.ndarray:
    return np.linalg.norm(codes.astype(np.float32), axis=1)


def exact_order(codes: np.ndarray, scales: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row offsets best first and their cosines, in float64: the ranking the scan must match."""
    stored = codes.astype(np.float64) * scales[:, None]
    cosines = stored @ query / np.linalg.norm(stored, axis=1)
    return np.argsort(-cosines, kind="stable"), cosines


def test_the_int8_scan_returns_the_exact_nearest_with_their_exact_cosines():
    rng = np.random.default_rng(7)
    rows, centers = clustered(rng, 20_000)
    codes, scales = quantize(rows)
    ids = np.arange(100, 100 + len(codes), dtype=np.int64)
    recalls = []
    for n in range(30):
        query = unit(centers[n] + 0.05 * rng.standard_normal(DIMENSIONS))
        order, cosines = exact_order(codes, scales, query)
        found = index.rank(codes, lengths_of(codes), ids, query, 1000)
        got = np.array([i for i, _ in found]) - 100
        # The order and the scores are the exact ones of what was found...
        assert [s for _, s in found] == pytest.approx(cosines[got], abs=1e-5)
        assert all(a[1] >= b[1] for a, b in zip(found, found[1:]))
        # ...the first ten of the thousand are the exact first ten, and the thousand are the
        # exact thousand but for near-ties at the boundary.
        assert list(got[:10]) == list(order[:10])
        recalls.append(len(set(got) & set(order[:1000])) / 1000)
    assert min(recalls) >= 0.97 and np.mean(recalls) >= 0.99, recalls


def test_ids_known_gone_are_left_out_and_fewer_rows_than_asked_are_all_returned():
    rng = np.random.default_rng(8)
    rows, _ = clustered(rng, 50, topics=5)
    codes, _ = quantize(rows)
    ids = np.arange(1, 51, dtype=np.int64)
    lengths = lengths_of(codes)
    everything = index.rank(codes, lengths, ids, rows[0], 1000)
    assert sorted(i for i, _ in everything) == list(range(1, 51)) and everything[0][0] == 1
    assert everything[0][1] == pytest.approx(1.0, abs=1e-3)
    found = index.rank(codes, lengths, ids, rows[0], 10, gone_rows=np.array([0, 1, 2]))
    assert len(found) == 10 and not {1, 2, 3} & {i for i, _ in found}
    assert len(index.rank(codes, lengths, ids, rows[0], 1000, gone_rows=np.array([0, 1, 2]))) == 47
    assert index.rank(codes[:0], lengths[:0], ids[:0], rows[0], 10) == []


_segment_numbers = itertools.count()


def store(workspace_id: str, vectors: np.ndarray, first_id: int | None = None, transcripts=None) -> list[int]:
    """Rows as the writer stores them (int8 + scale); explicit ids from `first_id` when given,
    transcripts from `transcripts` (one a row; "tr" when not given)."""
    codes, scales = quantize(vectors)
    made = []
    for n, (code, scale) in enumerate(zip(codes, scales)):
        row = SegmentEmbedding.objects.create(
            **({"id": first_id + n} if first_id is not None else {}), segment_id=f"seg-{next(_segment_numbers)}",
            workspace_id=workspace_id, transcript_id=transcripts[n] if transcripts else "tr", model=MODEL,
            text_hash="h", vector=code.tobytes(), scale=float(scale),
        )  # fmt: skip
        made.append(row.id)
    return made


@pytest.fixture
def fresh_cache():
    index.forget()
    yield
    index.forget()


def ids_of(found) -> list[int]:
    return [i for i, _ in found]


@pytest.mark.django_db
def test_the_cache_sees_vectors_written_since_its_load_at_once(fresh_cache):
    rng = np.random.default_rng(9)
    rows, _ = clustered(rng, 300, topics=30)
    first = store("ws-a", rows[:200])
    store("ws-b", rows[200:])  # another workspace's: never read for ws-a
    assert index.nearest("ws-a", MODEL, rows[0], 1)[0][0] == first[0]
    assert index._cache[("ws-a", MODEL)].size == 200
    added = store("ws-a", unit(rng.standard_normal((1, DIMENSIONS))))
    query = SegmentEmbedding.objects.get(id=added[0])
    vector = np.frombuffer(bytes(query.vector), dtype=np.int8).astype(np.float32)
    found = index.nearest("ws-a", MODEL, unit(vector), 3)
    assert found[0][0] == added[0] and found[0][1] == pytest.approx(1.0, abs=1e-6)
    assert index._cache[("ws-a", MODEL)].size == 201
    assert index.nearest("ws-a", "another-model@2", rows[0], 5) == []  # vectors of one model only


@pytest.mark.django_db
def test_a_vector_found_gone_is_never_returned_and_the_rows_are_compacted(fresh_cache, monkeypatch):
    rng = np.random.default_rng(10)
    rows, _ = clustered(rng, 400, topics=4)
    made = store("ws-a", rows)
    target = rows[5]
    assert index.nearest("ws-a", MODEL, target, 1)[0][0] == made[5]
    SegmentEmbedding.objects.filter(id=made[5]).delete()
    # The cache cannot know until a search reads the row back and finds it gone.
    assert index.nearest("ws-a", MODEL, target, 1)[0][0] == made[5]
    index.forget_ids("ws-a", MODEL, {made[5]})
    after = index.nearest("ws-a", MODEL, target, 10)
    assert made[5] not in ids_of(after) and len(after) == 10
    entry = index._cache[("ws-a", MODEL)]
    assert entry.size == 400 and entry.gone == {made[5]}
    monkeypatch.setattr(index, "COMPACT_AFTER", 50)
    index.forget_ids("ws-a", MODEL, set(made[100:160]))
    assert entry.size == 400 - 61 and not entry.gone
    assert set(entry.ids[: entry.size]) == set(made) - {made[5]} - set(made[100:160])
    assert not ({made[5]} | set(made[100:160])) & set(ids_of(index.nearest("ws-a", MODEL, target, 400)))


@pytest.mark.django_db
def test_the_periodic_check_drops_deleted_rows_and_reads_rows_committed_below_the_last_id(fresh_cache, monkeypatch):
    rng = np.random.default_rng(11)
    rows, _ = clustered(rng, 120, topics=12)
    made = store("ws-a", rows[:100], first_id=1000)
    index.nearest("ws-a", MODEL, rows[0], 5)
    entry = index._cache[("ws-a", MODEL)]
    # Deleted rows, and a row committed late with an id below the last one read (as a
    # PostgreSQL sequence hands out ids before commit).
    SegmentEmbedding.objects.filter(id__in=made[10:20]).delete()
    late = store("ws-a", rows[100:101], first_id=500)
    assert index.nearest("ws-a", MODEL, rows[100], 1)[0][0] != late[0]  # not seen yet
    monkeypatch.setattr(index, "RECONCILE_SECONDS", 0.0)
    found = ids_of(index.nearest("ws-a", MODEL, rows[100], 100))
    assert found[0] == late[0]
    assert entry.size == 91 and not entry.gone
    assert set(entry.ids[: entry.size]) == set(made) - set(made[10:20]) | set(late)
    assert not set(made[10:20]) & set(found)


@pytest.mark.django_db
def test_the_nearest_are_grouped_per_transcript_best_first(fresh_cache):
    rng = np.random.default_rng(12)
    rows, centers = clustered(rng, 60, topics=3)
    made = store("ws-a", rows, transcripts=[f"t{n % 6}" for n in range(60)])
    query = unit(centers[0] + 0.05 * rng.standard_normal(DIMENSIONS))
    ranked = index.nearest("ws-a", MODEL, query, 60)
    grouped = index.nearest_per_transcript("ws-a", MODEL, query, 60)
    # Each transcript once, with its best row, in the order of those rows.
    transcript_of = {made[n]: f"t{n % 6}" for n in range(60)}
    expected, seen = [], set()
    for embedding_id, score in ranked:
        if transcript_of[embedding_id] not in seen:
            seen.add(transcript_of[embedding_id])
            expected.append((embedding_id, score, transcript_of[embedding_id]))
    assert grouped == expected and len(grouped) == 6
