"""Which segments need a vector, and writing them: the embedding task and the backfill both
come here. A segment needs one when it has none of the current model (none at all, another
model's, or one made from other text): that row is replaced, so one segment has one vector.

Work is done in batches of BATCH segments: one read, one model call, one write transaction.
The read and the model call hold no transaction, so appends never wait on the model."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection, transaction

from apps.recordings.models import Segment, SegmentEmbedding, Transcript
from apps.recordings.semantic.embedders import Embedder, current
from apps.recordings.semantic.vectors import quantize

BATCH = 64
SEGMENTS = Segment._meta.db_table
EMBEDDINGS = SegmentEmbedding._meta.db_table
TRANSCRIPTS = Transcript._meta.db_table


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Pending:
    segment_id: str
    workspace_id: str
    transcript_id: str
    text: str


def _needs(rows: Iterable[tuple], model: str) -> list[Pending]:
    """Of (segment id, workspace, transcript, text, stored model, stored hash) rows, those
    whose stored vector is missing, of another model or of other text."""
    return [
        Pending(segment_id, workspace_id, transcript_id, text)
        for segment_id, workspace_id, transcript_id, text, stored_model, stored_hash in rows
        if stored_model != model or stored_hash != text_hash(text)
    ]


_SELECT = (
    f"SELECT s.id, s.workspace_id, s.transcript_id, s.text, e.model, e.text_hash FROM {SEGMENTS} AS s"
    f" LEFT JOIN {EMBEDDINGS} AS e ON e.segment_id = s.id"
)


def pending_of_session(session_id: str, model: str) -> list[Pending]:
    """The session's segments (both revisions) that need a vector. Those that have a vector of
    the model are left out by the database: a live session's task reads what is new only."""
    sql = (
        _SELECT + f" WHERE s.transcript_id IN (SELECT id FROM {TRANSCRIPTS} WHERE session_id = %s)"
        " AND (e.id IS NULL OR e.model <> %s) ORDER BY s.transcript_id, s.sequence"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_id, model])
        return _needs(cursor.fetchall(), model)


def pending_after(after: str, model: str, limit: int, workspace_id: str | None = None) -> tuple[list[Pending], str | None]:
    """Segments past id `after` (in id order) that need a vector, reading at most `limit`
    segments; and the last id read (None when none was left). The backfill's walk: a rerun
    starts again from the first id and skips what is done at the cost of an index read."""
    sql = _SELECT + " WHERE s.id > %s" + (" AND s.workspace_id = %s" if workspace_id else "") + " ORDER BY s.id LIMIT %s"
    params = [after, *([workspace_id] if workspace_id else []), limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _needs(rows, model), (rows[-1][0] if rows else None)


def count_pending(model: str, workspace_id: str | None = None) -> int:
    """Segments without a current vector (a vector of other text counts as current here: the
    walk finds those; this is the progress bar's total)."""
    where = " WHERE s.workspace_id = %s" if workspace_id else ""
    sql = (
        f"SELECT count(*) FROM {SEGMENTS} AS s LEFT JOIN {EMBEDDINGS} AS e ON e.segment_id = s.id AND e.model = %s"
        f"{where}{' AND' if where else ' WHERE'} e.id IS NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [model, *([workspace_id] if workspace_id else [])])
        return cursor.fetchone()[0]


def embed(pending: list[Pending], embedder: Embedder | None = None) -> int:
    """Embed and store `pending` in batches; returns the vectors written. A segment deleted
    while its batch was embedded gets no vector (the write skips ids no longer stored), and
    one whose text changed meanwhile is found again by the next run (its hash differs)."""
    embedder = embedder or current()
    written = 0
    for start in range(0, len(pending), BATCH):
        batch = pending[start : start + BATCH]
        codes, scales = quantize(embedder.passages([p.text for p in batch]))
        ids = [p.segment_id for p in batch]
        with transaction.atomic():
            alive = set(Segment.objects.filter(id__in=ids).values_list("id", flat=True))
            SegmentEmbedding.objects.filter(segment_id__in=ids).delete()
            rows = [
                SegmentEmbedding(segment_id=p.segment_id, workspace_id=p.workspace_id, transcript_id=p.transcript_id,
                                 model=embedder.name, text_hash=text_hash(p.text), vector=codes[i].tobytes(),
                                 scale=float(scales[i]))
                for i, p in enumerate(batch) if p.segment_id in alive
            ]  # fmt: skip
            # Two tasks of one session may embed a segment at once: the first row written stays.
            SegmentEmbedding.objects.bulk_create(rows, ignore_conflicts=True)
        written += len(rows)
    return written
