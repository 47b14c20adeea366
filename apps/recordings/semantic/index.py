"""A process's cache of each workspace's vectors, and the segments nearest a query vector.

A search reads only its own workspace's vectors (by the index (workspace_id, model, id)), so
its cost follows that workspace's size. The first search of a workspace in a process loads its
int8 codes as stored; later ones read only the rows written since (ids grow). A row deleted
since stays until a search finds it gone (`forget_ids`: never returned again, the rows dropped
past COMPACT_AFTER of them) or the check of ids every RECONCILE_SECONDS (ids only) does; that
check also reads a row committed after a larger id was read (PostgreSQL's sequences).

Exact search: every row's int8 dot product with the query quantized the same way (NumKong's
SIMD kernels, exact integers), divided by the row's length; the best `k` are rescored with the
float query, so what is returned carries the exact cosine of its stored vector. Cosine ignores
a row's length, so its scale is not needed. Rows below `size` never change in place: appends
write past it, a compaction builds new arrays."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
from django.db import connection
import numkong

from apps.recordings.models import SegmentEmbedding
from apps.recordings.semantic.vectors import quantize

RECONCILE_SECONDS = 600.0
COMPACT_AFTER = 256  # rows found gone before the arrays are rebuilt without them
TABLE = SegmentEmbedding._meta.db_table
LOAD_BATCH = 20_000


@dataclass
class WorkspaceVectors:
    """One workspace's vectors of one model: rows [0, size) of `codes` are in use, `ids[i]` is
    row i's embedding id, `lengths[i]` its length and `names[transcripts[i]]` its transcript,
    `gone` the ids of rows known deleted and `gone_rows` their rows. Capacity doubles, so
    appends cost amortised O(rows added); `names` only grows."""

    dimensions: int
    codes: np.ndarray = field(init=False)
    ids: np.ndarray = field(init=False)
    lengths: np.ndarray = field(init=False)
    transcripts: np.ndarray = field(init=False)
    names: list[str] = field(default_factory=list)
    numbers: dict[str, int] = field(default_factory=dict)
    gone_rows: np.ndarray = field(init=False)
    size: int = 0
    last_id: int = 0
    checked_at: float = field(default_factory=time.monotonic)
    gone: frozenset[int] = frozenset()
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.codes = np.empty((0, self.dimensions), dtype=np.int8)
        self.ids = np.empty(0, dtype=np.int64)
        self.lengths = np.empty(0, dtype=np.float32)
        self.transcripts = np.empty(0, dtype=np.int32)
        self.gone_rows = np.empty(0, dtype=np.int64)

    def append(self, ids: np.ndarray, codes: np.ndarray, transcripts: list[str]) -> None:
        needed = self.size + len(ids)
        if needed > len(self.ids):
            capacity = max(needed, 2 * len(self.ids), 1024)
            grown = np.empty((capacity, self.dimensions), dtype=np.int8)
            grown[: self.size] = self.codes[: self.size]
            grown_ids = np.empty(capacity, dtype=np.int64)
            grown_ids[: self.size] = self.ids[: self.size]
            grown_lengths = np.empty(capacity, dtype=np.float32)
            grown_lengths[: self.size] = self.lengths[: self.size]
            grown_transcripts = np.empty(capacity, dtype=np.int32)
            grown_transcripts[: self.size] = self.transcripts[: self.size]
            self.codes, self.ids, self.lengths = grown, grown_ids, grown_lengths
            self.transcripts = grown_transcripts
        self.codes[self.size : needed] = codes
        self.ids[self.size : needed] = ids
        lengths = np.linalg.norm(np.asarray(codes, dtype=np.float32), axis=1)
        self.lengths[self.size : needed] = np.where(lengths > 0, lengths, 1.0)  # a zero row scores 0
        for name in transcripts:
            if name not in self.numbers:
                self.numbers[name] = len(self.names)
                self.names.append(name)
        self.transcripts[self.size : needed] = [self.numbers[name] for name in transcripts]
        self.size = needed
        if len(ids):
            self.last_id = max(self.last_id, int(ids.max()))

    def drop(self, ids: set[int]) -> None:
        """Mark `ids` gone; past COMPACT_AFTER, new arrays without their rows (a search holding
        the old ones goes on with them)."""
        new = frozenset(ids) - self.gone
        if not new:
            return
        self.gone = self.gone | new
        rows = np.flatnonzero(np.isin(self.ids[: self.size], np.fromiter(new, dtype=np.int64, count=len(new))))
        self.gone_rows = np.concatenate([self.gone_rows, rows])
        if len(self.gone) > COMPACT_AFTER:
            self.compact()

    def compact(self) -> None:
        """New arrays without the rows of `gone`."""
        if not self.gone:
            return
        keep = np.ones(self.size, dtype=bool)
        keep[self.gone_rows] = False
        self.codes, self.ids = self.codes[: self.size][keep], self.ids[: self.size][keep]
        self.lengths, self.transcripts = self.lengths[: self.size][keep], self.transcripts[: self.size][keep]
        self.size, self.gone, self.gone_rows = len(self.ids), frozenset(), np.empty(0, dtype=np.int64)


_cache: dict[tuple[str, str], WorkspaceVectors] = {}
_cache_lock = threading.Lock()


def _append_rows(entry: WorkspaceVectors, rows: list[tuple]) -> None:
    """(id, vector bytes, transcript id) rows into the entry."""
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    codes = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.int8).reshape(len(rows), entry.dimensions)
    entry.append(ids, codes, [r[2] for r in rows])


def _read_new(entry: WorkspaceVectors, workspace_id: str, model: str) -> None:
    """Rows of the workspace and model past the entry's last id, in id order, in batches. The
    newest id first, by the index (workspace_id, model, id): a search that finds nothing new
    costs that one probe. The rows' read is bounded by it too: PostgreSQL reads them along the
    primary key, through every workspace's rows written meanwhile."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT max(id) FROM {TABLE} WHERE workspace_id = %s AND model = %s", [workspace_id, model])
        newest = cursor.fetchone()[0]
    sql = (
        f"SELECT id, vector, transcript_id FROM {TABLE} WHERE workspace_id = %s AND model = %s AND id > %s"
        " AND id <= %s ORDER BY id LIMIT %s"
    )
    while newest is not None and entry.last_id < newest:
        with connection.cursor() as cursor:
            cursor.execute(sql, [workspace_id, model, entry.last_id, newest, LOAD_BATCH])
            rows = cursor.fetchall()
        if not rows:
            return
        _append_rows(entry, rows)


def _reconcile(entry: WorkspaceVectors, workspace_id: str, model: str) -> None:
    """The ids stored now against the cached ones: rows deleted are dropped, rows below the
    last id read that the cache lacks (committed out of id order) are read."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {TABLE} WHERE workspace_id = %s AND model = %s", [workspace_id, model])
        stored = np.fromiter((r[0] for r in cursor.fetchall()), dtype=np.int64)
    cached = entry.ids[: entry.size]
    dead = np.setdiff1d(cached, stored, assume_unique=True)
    if len(dead):
        entry.drop({int(i) for i in dead})
        entry.compact()
    missing = np.setdiff1d(stored[stored <= entry.last_id], cached, assume_unique=True)
    for start in range(0, len(missing), 1000):
        batch = [int(i) for i in missing[start : start + 1000]]
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, vector, transcript_id FROM {TABLE} WHERE id IN ({', '.join(['%s'] * len(batch))})", batch)
            rows = cursor.fetchall()
        if rows:
            _append_rows(entry, rows)
    entry.checked_at = time.monotonic()


def workspace_vectors(workspace_id: str, model: str, dimensions: int) -> WorkspaceVectors:
    """The workspace's vectors as of now (loaded, or brought up to date)."""
    key = (workspace_id, model)
    with _cache_lock:
        entry = _cache.get(key)
        if entry is None:
            entry = _cache[key] = WorkspaceVectors(dimensions)
    with entry.lock:
        if entry.size and time.monotonic() - entry.checked_at > RECONCILE_SECONDS:
            _reconcile(entry, workspace_id, model)
        _read_new(entry, workspace_id, model)
    return entry


def quantize_query(query: np.ndarray) -> np.ndarray:
    """The query as int8 codes, as the rows are stored (the scale is left out: cosine)."""
    codes, _ = quantize(np.asarray(query, dtype=np.float32).reshape(1, -1))
    return codes[0]


def _ranked_rows(codes: np.ndarray, lengths: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int,
                 gone_rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(rows, exact cosines) of the `k` rows nearest `query`, best first, ties by id."""
    size = len(codes)
    kept = size - (0 if gone_rows is None else len(gone_rows))
    k = min(k, kept)
    if k <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    # int32 sums of int8 products: exact in float32 for these lengths (below 2**24).
    scores = np.asarray(numkong.cdist(quantize_query(query)[None], codes, "dot", out_dtype="float32"))[0] / lengths
    if gone_rows is not None and len(gone_rows):
        scores[gone_rows] = -np.inf
    top = np.argpartition(-scores, k - 1)[:k] if k < size else np.arange(size)
    top = top[np.isfinite(scores[top])]
    exact = (codes[top].astype(np.float32) @ np.asarray(query, dtype=np.float32)) / lengths[top]
    order = np.lexsort((ids[top], -exact))
    return top[order], exact[order]


def rank(codes: np.ndarray, lengths: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int,
         gone_rows: np.ndarray | None = None) -> list[tuple[int, float]]:  # fmt: skip
    """The `k` rows of `codes` (int8, C-contiguous; `lengths` their lengths) nearest the unit
    vector `query`, leaving out `gone_rows`: (id, cosine), best first, ties by id."""
    rows, exact = _ranked_rows(codes, lengths, ids, query, k, gone_rows)
    return [(int(i), float(e)) for i, e in zip(ids[rows], exact)]


def nearest(workspace_id: str, model: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The `k` embedding ids of the workspace nearest `query` (a unit vector), best first, with
    their cosine similarity. Some may be gone since (see the module's docstring)."""
    entry = workspace_vectors(workspace_id, model, len(query))
    with entry.lock:
        codes, lengths, ids, size, gone_rows = entry.codes, entry.lengths, entry.ids, entry.size, entry.gone_rows
    return rank(codes[:size], lengths[:size], ids[:size], query, k, gone_rows)


def nearest_per_transcript(workspace_id: str, model: str, query: np.ndarray,
                           k: int) -> list[tuple[int, float, str]]:  # fmt: skip
    """Of the `k` rows nearest `query`, the best of each transcript: (embedding id, cosine,
    transcript id), best first. Grouped here, so a search reads back one row a revision."""
    entry = workspace_vectors(workspace_id, model, len(query))
    with entry.lock:
        codes, lengths, ids, size = entry.codes, entry.lengths, entry.ids, entry.size
        transcripts, names, gone_rows = entry.transcripts, entry.names, entry.gone_rows
    rows, exact = _ranked_rows(codes[:size], lengths[:size], ids[:size], query, k, gone_rows)
    numbers = transcripts[rows]
    _, first = np.unique(numbers, return_index=True)
    first.sort()
    return [(int(ids[rows[i]]), float(exact[i]), names[numbers[i]]) for i in first]


def forget_ids(workspace_id: str, model: str, ids: set[int]) -> None:
    """Embedding ids a search found gone from the database: never returned again."""
    entry = _cache.get((workspace_id, model))
    if entry is not None and ids:
        with entry.lock:
            entry.drop(ids)


def forget() -> None:
    """Drop every cached workspace (tests, after the database is emptied)."""
    with _cache_lock:
        _cache.clear()
