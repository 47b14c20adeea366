"""Inspect a seeded benchmark database and (optionally) issue an API key, for bench/rest.py and
the other scripts that load a seeded database (bench/harness.py `probe` runs it).

Run as `python -m bench.probe --workspace bench [--issue-key]` with DATABASE_URL set (the
settings are the harness's, `setup_django`); prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re

from bench.harness import read_key, setup_django

setup_django()

from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402

from apps.recordings.models import RevisionKind, Segment, Session, Transcript  # noqa: E402
from apps.tenancy.models import Workspace  # noqa: E402

STOPWORDS = set(
    "about after again also because been before being could does doing during from have having here "
    "into just more most other over same should some such than that their them then there these they "
    "this those through under until very were what when where which while will with would your yours "
    "okay yeah right think know going really thing things let's we're that's it's don't".split()
)


def flat_transcript_sizes(workspace: Workspace) -> dict[str, int]:
    """Session id → number of segments its flat transcript has (final revision, else committed)."""
    rows = (
        Transcript.objects.filter(workspace=workspace)
        .annotate(n=Count("segments"))
        .values_list("session_id", "revision_kind", "n")
    )
    by_session: dict[str, dict[str, int]] = collections.defaultdict(dict)
    for session_id, kind, n in rows:
        by_session[session_id][kind] = n
    return {s: kinds.get(RevisionKind.FINAL, kinds.get(RevisionKind.COMMITTED, 0)) for s, kinds in by_session.items()}


def search_words(workspace: Workspace, count: int = 6) -> list[str]:
    """Words of the seeded text, from frequent to rarer, for realistic search queries."""
    ids = list(Segment.objects.filter(workspace=workspace).values_list("pk", flat=True)[:2000])
    rng = random.Random(7)
    sample = rng.sample(ids, min(300, len(ids)))
    words: collections.Counter[str] = collections.Counter()
    for text in Segment.objects.filter(pk__in=sample).values_list("text", flat=True):
        words.update(w for w in re.findall(r"[a-z]{5,}", text.lower()) if w not in STOPWORDS)
    ranked = [w for w, _ in words.most_common()]
    if len(ranked) <= count:
        return ranked
    # Spread across the frequency ranking: some very common words, some rarer ones.
    step = max(1, len(ranked) // (count * 2))
    return [ranked[i * step] for i in range(count)]


def fts_tables() -> list[dict[str, str]]:
    if connection.vendor != "sqlite":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type='table' AND lower(sql) LIKE '%using fts%'"
        )
        return [{"name": name, "sql": sql} for name, sql in cursor.fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", default="bench")
    parser.add_argument("--issue-key", action="store_true")
    parser.add_argument("--checkpoint", action="store_true", help="SQLite: fold the WAL into the main file")
    args = parser.parse_args()

    out: dict = {"vendor": connection.vendor}
    workspace = Workspace.objects.filter(slug=args.workspace).first()
    if workspace is None:
        out["workspace"] = None
        print(json.dumps(out))
        return
    out["workspace"] = {"id": workspace.id, "slug": workspace.slug}
    out["sessions"] = Session.objects.filter(workspace=workspace).count()
    out["segments"] = Segment.objects.filter(workspace=workspace).count()
    sizes = flat_transcript_sizes(workspace)
    out["max_transcript_segments"] = max(sizes.values(), default=0)
    session_ids = list(
        Session.objects.filter(workspace=workspace).order_by("-created_at", "-id").values_list("id", flat=True)
    )
    out["session_ids"] = session_ids
    out["transcript_session_ids"] = [s for s in session_ids if sizes.get(s) == out["max_transcript_segments"]]
    out["search_words"] = search_words(workspace)
    out["fts_tables"] = fts_tables()
    if args.issue_key:
        out["api_key"] = read_key(workspace, "bench@example.invalid", "bench")
    if args.checkpoint and connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            out["checkpoint"] = cursor.fetchone()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
