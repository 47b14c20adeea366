#!/usr/bin/env python3
"""Importer, PostgreSQL: the per-revision word index kept by its trigger, session by session,
against the same index built by one pass over several sessions' revisions at the end of their
transaction (a deferral of the index to a bulk pass), in one run, A and B alternating.

    .venv/bin/python bench/import_index_pass.py --sessions 100 --chunk 25 --rounds 2

The first `--sessions` lines of the import benchmark's file (bench/import_bench.py writes it;
`--file`) are parsed once, then loaded with the bulk loader (`import_sessions`) into database
`--db` (migrated; its recordings tables emptied before each load):
- `trigger`: one transaction per session, as the importer does; the trigger indexes each COPY;
- `pass`: one transaction per `--chunk` sessions, the trigger switched off for the load (DDL on
  a scratch database, for the measurement only) and the index rows of the chunk's revisions
  written by the trigger's own statement over them before the commit;
- `none`: as `trigger` with the trigger off and no pass (what the index costs at all).
Figures: CPU seconds of the database backend serving the load (/proc/<pid>/stat) and of this
process; after each `pass` load the index must equal the `trigger` load's (rows, sequences and
weights by session external id and word).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib import import_module
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402

TABLES = ("recordings_session, recordings_transcript, recordings_segment, recordings_boardcontent, "
          "recordings_revisionword")
DIGEST = """
    SELECT count(*), coalesce(sum(cardinality(w.sequences)), 0),
           md5(coalesce(string_agg(s.external_id || t.revision_kind || w.word || w.sequences::text || w.weights::text,
                                   ',' ORDER BY s.external_id, t.revision_kind, w.word), ''))
    FROM recordings_revisionword w JOIN recordings_transcript t ON t.id = w.transcript_id
    JOIN recordings_session s ON s.id = t.session_id
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", default=str(ROOT / "bench/data/import-bench-3000x320.jsonl"))
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/connect_ingest")
    args = parser.parse_args()
    harness.setup_django(DATABASE_URL=args.db)
    from django.core.management import call_command
    from django.db import connection, transaction

    from apps.ingest.importer import sources
    from apps.recordings.services import import_sessions
    from apps.tenancy.models import Workspace

    call_command("migrate", verbosity=0)
    index = import_module("apps.recordings.migrations.0008_search_revision_word_weights")
    rows = "(SELECT * FROM recordings_segment WHERE transcript_id IN (SELECT id FROM recordings_transcript " \
           "WHERE session_id = ANY(%s)))"
    pass_sql = f"{index._WEIGHTED.format(rows=rows)} INSERT INTO {index.TABLE} {index._COLUMNS} {index._ROWS}"
    records = [i.record for i in islice(sources.items([Path(args.file)]), args.sessions)]
    segments = sum(r.segment_count for r in records)
    workspace, _ = Workspace.objects.get_or_create(slug="bench", defaults={"name": "bench"})

    def load(variant: str) -> tuple[float, float, tuple]:
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {TABLES} CASCADE")
            cursor.execute("CHECKPOINT")
            before, client = harness.backend_cpu(cursor), time.process_time()
            size = args.chunk if variant == "pass" else 1
            if variant != "trigger":
                cursor.execute("ALTER TABLE recordings_segment DISABLE TRIGGER recordings_revisionword_ai")
            for start in range(0, len(records), size):
                chunk = records[start:start + size]
                with transaction.atomic():
                    ids = [import_sessions(workspace=workspace, sessions=[r.session])[0] for r in chunk]
                    if variant == "pass":
                        cursor.execute(pass_sql, [ids])
            if variant != "trigger":
                cursor.execute("ALTER TABLE recordings_segment ENABLE TRIGGER recordings_revisionword_ai")
            backend, client = harness.backend_cpu(cursor) - before, time.process_time() - client
            cursor.execute(DIGEST)
            return backend, client, cursor.fetchone()

    print(f"{len(records)} sessions, {segments:,} segments, chunk {args.chunk}; CPU s (backend + client)")
    reference = None
    for round_ in range(1, args.rounds + 1):
        for variant in ("trigger", "pass", "none"):
            backend, client, digest = load(variant)
            if variant == "trigger":
                reference = digest
            same = "index equal" if digest == reference else ("no index" if variant == "none" else "INDEX DIFFERS")
            print(f"round {round_} {variant:8} backend {backend:6.2f} client {client:5.2f} "
                  f"({1e6 * (backend + client) / segments:5.0f} µs/segment) {same} {digest[:2]}", flush=True)


if __name__ == "__main__":
    main()
