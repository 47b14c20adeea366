"""What each index on the append's tables costs an append's PostgreSQL backend.

    .venv/bin/python bench/ingest_indexes.py --postgres-db connect_bench_indexes [--root ../main]

One keyed append of `--batch` segments through Django's test client (the idempotency claim, the
numbered insert and its triggers, the events, the stored answer), `--requests` times per
variant, each variant in one transaction that first drops some indexes: PostgreSQL's DDL is
transactional, so the rollback at its end restores them, and every variant starts from the same
database (a new session, an empty revision). Measured: the CPU of the connection's backend
(/proc/<pid>/schedstat) per append. Variants alternate, `--rounds` times, in one process. `--history N`: the
revision already holds N segments (appended in batches of 500 first), as a meeting under way.

The database is migrated by `--root` when given (main's schema, every index there), else by
this checkout; a variant dropping an index the schema lacks is skipped. In one transaction the
GIN index's pending list never reaches `gin_pending_list_limit`, so its periodic flush into the
index (paid by whichever append fills it, or by vacuum) is not in these figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness  # noqa: E402

VARIANTS = {
    "every index": [],
    "- search vector GIN": ["recordings_segment_search_vector"],
    "- segment workspace FK + _like, id _like": [
        "recordings_segment_workspace_id_94889c92", "recordings_segment_workspace_id_94889c92_like",
        "recordings_segment_id_7ad25fd5_like"],
    "- event workspace FK + _like, id _like": [
        "events_event_workspace_id_6d694154", "events_event_workspace_id_6d694154_like", "events_event_id_75d2cab3_like"],
    "- idempotency workspace FK + _like": [
        "ingest_idempotencykey_workspace_id_d8e0bf23", "ingest_idempotencykey_workspace_id_d8e0bf23_like"],
    "- all of the above": None,  # filled below
    "(kept) - event_type_id": ["event_type_id"],
    "(kept) - segment_commit_order": ["segment_commit_order"],
    "(kept) - the word index's insert trigger": ["trigger:recordings_revisionword_ai"],
}
VARIANTS["- all of the above"] = [n for k, names in VARIANTS.items() if k.startswith("- ") and names for n in names]
HISTORY_TEXT = "we went through the budget review and the roadmap for next quarter"

CODE = r"""
import json, os, time, uuid
from django.db import connection, transaction
from django.test import Client
from apps.tenancy import services as t
from apps.recordings import services
from apps.recordings.models import Session
variants, size, count, rounds, history, history_text = json.loads(%(args)r)
slug = "idx-" + uuid.uuid4().hex[:8]
ws = t.create_workspace(slug=slug)
key = t.issue_ingest_key(membership=t.add_member(workspace=ws, email=slug + "@ingest.test")).key
client, auth = Client(), {"Authorization": "Bearer " + key}
with connection.cursor() as cursor:
    cursor.execute("SELECT pg_backend_pid()")
    pid = cursor.fetchone()[0]
    cursor.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")
    present = {row[0] for row in cursor.fetchall()}
def backend_cpu():  # seconds on a core (schedstat: nanoseconds, where stat counts 10 ms ticks)
    return int(open(f"/proc/{pid}/schedstat").read().split()[0]) / 1e9
def run(names, n):
    session = "s-" + uuid.uuid4().hex[:8]
    with transaction.atomic():
        with connection.cursor() as cursor:
            for name in names:
                if name.startswith("trigger:"):
                    cursor.execute(f'ALTER TABLE recordings_segment DISABLE TRIGGER "{name[8:]}"')
                else:
                    cursor.execute(f'DROP INDEX "{name}"')
        assert client.put("/api/v1/ingest/sessions/" + session, data="{}", content_type="application/json",
                          headers=auth).status_code == 201
        # The revision's past: `history` segments already appended (a meeting under way).
        row = Session.objects.get(workspace=ws, external_id=session)
        for first in range(0, history, 500):
            services.append_sequenced_segments(session=row, first_sequence=first, segments=[
                services.SegmentInput(n, n + 1, history_text) for n in range(first, min(history, first + 500))])
        def append(sequence):
            body = {"segments": [{"sequence": sequence + k, "timestampStart": (sequence + k) * 500,
                                  "timestampEnd": (sequence + k) * 500 + 400, "speakerLabel": "Speaker 1",
                                  "text": "the quarterly numbers look fine", "confidence": 0.9}
                                 for k in range(size)]}
            answer = client.post("/api/v1/ingest/sessions/" + session + "/segments", data=json.dumps(body),
                                 content_type="application/json",
                                 headers={**auth, "Idempotency-Key": session + str(sequence)})
            assert answer.status_code == 200, answer.content
        for i in range(30):
            append(history + i * size)
        before = backend_cpu()
        for i in range(30, 30 + n):
            append(history + i * size)
        spent = backend_cpu() - before
        transaction.set_rollback(True)
    return spent * 1000 / n
out = {name: [] for name in variants}
for r in range(rounds):
    order = list(variants.items()) if r %% 2 == 0 else list(reversed(variants.items()))
    for name, names in order:
        if all(n in present for n in names if not n.startswith("trigger:")):
            out[name].append(run(names, count))
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres-db", default="connect_bench_indexes")
    parser.add_argument("--redis-db", type=int, default=5)
    parser.add_argument("--root", help="migrate with the Connect checked out there (main: every index)")
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--history", type=int, default=0, help="segments already in the revision before the appends")
    parser.add_argument("--only", action="append", default=[], help="run only the variants whose name has this")
    args = parser.parse_args()
    import json

    harness.ensure_postgres_database(args.postgres_db)
    db = harness.Database("postgres", f"postgres://postgres@127.0.0.1:5432/{args.postgres_db}", label="postgres",
                          extra_env={"REDIS_URL": f"redis://127.0.0.1:6379/{args.redis_db}"})
    root = Path(args.root).resolve() if args.root else None
    harness.manage(db, "migrate", "-v", "0", root=root)
    variants = {k: v for k, v in VARIANTS.items() if k == "every index" or not args.only
                or any(o in k for o in args.only)}
    code = CODE % {"args": json.dumps([variants, args.batch, args.requests, args.rounds, args.history, HISTORY_TEXT])}
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=harness.ROOT, env=db.env(),
                         text=True, capture_output=True, check=True).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    base = sorted(figures["every index"])[len(figures["every index"]) // 2] if figures["every index"] else None
    print(f"load average {os.getloadavg()[0]:.1f}; backend CPU per append of {args.batch} segments after "
          f"{args.history} in the revision, ms:")
    for name, values in figures.items():
        if not values:
            print(f"  {name}: (not in this schema)")
            continue
        median = sorted(values)[len(values) // 2]
        delta = f"  ({median - base:+.3f})" if base is not None else ""
        print(f"  {name}: median {median:.3f}{delta}  rounds: " + ", ".join(f"{v:.3f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
