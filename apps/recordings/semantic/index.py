"""A process's cache of each workspace's vectors, and the segments nearest a query vector.

A search reads only its own workspace's vectors (by the index (workspace_id, model, id)), so
its cost follows that workspace's size. The first search of a workspace in a process loads its
vectors; later ones read only the rows written since (ids grow), so a search sees what the
embedding task wrote a moment ago. Rows deleted since stay in the cache but point nowhere: the
hits are read back from the database by embedding id (`nearest` callers join to segments), so a
deleted vector is never shown; the cache is loaded anew after RELOAD_SECONDS, or at once when
more than a tenth of what it found was gone, so the dead rows do not pile up.

Brute force: every vector of the workspace is scored with one matrix-vector product (float32 in
memory, int8 in the database), and the best `k` taken with argpartition."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from apps.recordings.models import SegmentEmbedding
from apps.recordings.semantic.vectors import dequantize

RELOAD_SECONDS = 600.0
TABLE = SegmentEmbedding._meta.db_table
LOAD_BATCH = 20_000


@dataclass
class WorkspaceVectors:
    """One workspace's vectors of one model: rows [0, size) of `matrix` are in use, `ids[i]`
    is row i's embedding id. Capacity doubles, so appends cost amortised O(rows added)."""

    dimensions: int
    matrix: np.ndarray = field(init=False)
    ids: np.ndarray = field(init=False)
    size: int = 0
    last_id: int = 0
    loaded_at: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stale: bool = False

    def __post_init__(self) -> None:
        self.matrix = np.empty((0, self.dimensions), dtype=np.float32)
        self.ids = np.empty(0, dtype=np.int64)

    def append(self, ids: np.ndarray, rows: np.ndarray) -> None:
        needed = self.size + len(ids)
        if needed > len(self.ids):
            capacity = max(needed, 2 * len(self.ids), 1024)
            matrix = np.empty((capacity, self.dimensions), dtype=np.float32)
            matrix[: self.size] = self.matrix[: self.size]
            grown = np.empty(capacity, dtype=np.int64)
            grown[: self.size] = self.ids[: self.size]
            self.matrix, self.ids = matrix, grown
        self.matrix[self.size : needed] = rows
        self.ids[self.size : needed] = ids
        self.size = needed
        if len(ids):
            self.last_id = int(ids[-1])


_cache: dict[tuple[str, str], WorkspaceVectors] = {}
_cache_lock = threading.Lock()


def _read_new(entry: WorkspaceVectors, workspace_id: str, model: str) -> None:
    """Rows of the workspace and model past the entry's last id, in id order, in batches."""
    sql = (
        f"SELECT id, vector, scale FROM {TABLE} WHERE workspace_id = %s AND model = %s AND id > %s"
        " ORDER BY id LIMIT %s"
    )
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, [workspace_id, model, entry.last_id, LOAD_BATCH])
            rows = cursor.fetchall()
        if not rows:
            return
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        scales = np.fromiter((r[2] for r in rows), dtype=np.float32, count=len(rows))
        entry.append(ids, dequantize(b"".join(bytes(r[1]) for r in rows), scales, entry.dimensions))
        if len(rows) < LOAD_BATCH:
            return


def workspace_vectors(workspace_id: str, model: str, dimensions: int) -> WorkspaceVectors:
    """The workspace's vectors as of now (loaded, or brought up to date)."""
    key = (workspace_id, model)
    with _cache_lock:
        entry = _cache.get(key)
        if entry is None or entry.stale or time.monotonic() - entry.loaded_at > RELOAD_SECONDS:
            entry = _cache[key] = WorkspaceVectors(dimensions)
    with entry.lock:
        _read_new(entry, workspace_id, model)
    return entry


def nearest(workspace_id: str, model: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The `k` embedding ids of the workspace nearest `query` (a unit vector), best first, with
    their cosine similarity. Some may be gone since (see the module's docstring)."""
    entry = workspace_vectors(workspace_id, model, len(query))
    with entry.lock:
        size = entry.size
        matrix, ids = entry.matrix, entry.ids
    if not size:
        return []
    scores = matrix[:size] @ query.astype(np.float32)
    if size > k:
        top = np.argpartition(-scores, k)[:k]
    else:
        top = np.arange(size)
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in top]


def note_missing(workspace_id: str, model: str, found: int, missing: int) -> None:
    """What a search found gone: past a tenth, the next search loads the workspace anew."""
    if missing * 10 > max(found, 1):
        entry = _cache.get((workspace_id, model))
        if entry is not None:
            entry.stale = True


def forget() -> None:
    """Drop every cached workspace (tests, after the database is emptied)."""
    with _cache_lock:
        _cache.clear()
