#!/usr/bin/env python3
"""Importer benchmark: `import_recordings` on a JSON Lines file beside `seed_demo`'s loader.

    python bench/import_bench.py                                # 3,000 sessions, both databases
    python bench/import_bench.py --sessions 600 --db sqlite     # a fifth of the size, SQLite only

The file is seed_demo's own plan (`plan_session`, workspace `bench`, the fixed seed) written as
the import format, so both loaders write the same sessions, segments and boards. With
`--segments 320` a session has 320 committed segments and, when completed, a final revision of
about as many: 3,000 sessions make about 1.5 M segments. For each database, one run: a fresh,
migrated database per load, the importer and seed_demo alternating (`--rounds` repeats the
pair), and after each importer load a re-run of it on that database (everything skipped). Times are
the commands' wall clock, their final search-index upkeep included. SQLite under bench/data/,
PostgreSQL database connect_import_bench (dropped and re-created per load).
Results: a markdown table on stdout and in bench/results/import-<time>/results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import DATA, PG_ADMIN_URL, PYTHON, ROOT, Database, log, machine, new_run, save_results  # noqa: E402

PG_NAME = "connect_import_bench"
WORKSPACE = "bench"


def generate(path: Path, *, sessions: int, segments: int) -> int:
    """Write seed_demo's plan of `sessions` sessions as JSON Lines; returns the segment count."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    os.environ.setdefault("DATABASE_URL", "sqlite:///unused")
    os.environ.setdefault("CONNECT_DEVELOPMENT", "1")
    import django

    django.setup()
    from apps.recordings.management.commands.seed_demo import DEFAULT_SEED, plan_session

    class Workspace:  # plan_session reads the slug only
        slug = WORKSPACE

    now = datetime.now(timezone.utc)
    total = 0
    with path.open("w") as out:
        for index in range(sessions):
            s = plan_session(Workspace, index=index, seed=DEFAULT_SEED, segment_count=segments, now=now)
            committed = [seg for _, chunk in s.committed for seg in chunk]
            record = {
                "externalId": f"{WORKSPACE}-{index}", "label": s.label, "memo": s.memo, "status": s.status,
                "startedAt": _time(s.started_at), "endedAt": _time(s.ended_at), "createdAt": _time(s.created_at),
                "committed": [_segment(g) for g in committed],
                "final": None if s.final is None else [_segment(g) for g in s.final],
                "boards": [{"boardId": b.board_id, "status": b.status, "sourceRevisionKind": b.source_revision_kind,
                            "payload": b.payload, "createdAt": _time(b.created_at)} for b in s.boards or []],
            }  # fmt: skip
            total += len(committed) + len(s.final or [])
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return total


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _segment(g) -> dict:
    return {"timestampStart": g.timestamp_start, "timestampEnd": g.timestamp_end, "speakerLabel": g.speaker_label,
            "text": g.text, "confidence": g.confidence}  # fmt: skip


def fresh_database(kind: str, pg_url: str) -> Database:
    if kind == "sqlite":
        path = DATA / "import-bench.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        db = Database("sqlite", f"sqlite:///{path}", sqlite_path=path, label="sqlite")
    else:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{PG_NAME}"')
        db = Database("postgres", pg_url, label="postgres")
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=db.env(), check=True)
    return db


def timed(db: Database, *args: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=db.env(), text=True, capture_output=True)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return elapsed, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--segments", type=int, default=320, help="committed segments per session")
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=1, help="importer/seed_demo pairs per database")
    parser.add_argument("--pg-url", default=f"postgres://postgres@127.0.0.1:5432/{PG_NAME}")
    args = parser.parse_args()

    run_dir, started = new_run("import")
    DATA.mkdir(exist_ok=True)
    source = DATA / f"import-bench-{args.sessions}x{args.segments}.jsonl"
    log(f"generating {source.relative_to(ROOT)}")
    segments = generate(source, sessions=args.sessions, segments=args.segments)
    log(f"{args.sessions:,} sessions, {segments:,} segments, {source.stat().st_size / 1e6:.0f} MB")
    loadavg_before = os.getloadavg()
    results = []
    for kind in (["sqlite", "postgres"] if args.db == "both" else [args.db]):
        for round_ in range(args.rounds):
            for loader in ("import_recordings", "seed_demo"):
                db = fresh_database(kind, args.pg_url)
                log(f"{kind} round {round_ + 1}: {loader}")
                if loader == "seed_demo":
                    seconds, line = timed(db, "seed_demo", "--workspace", WORKSPACE, "--sessions", str(args.sessions),
                                          "--segments", str(args.segments), "--no-progress")  # fmt: skip
                else:
                    subprocess.run([PYTHON, "manage.py", "create_workspace", WORKSPACE], cwd=ROOT, env=db.env(),
                                   check=True, capture_output=True)  # fmt: skip
                    seconds, line = timed(db, "import_recordings", str(source), "--workspace", WORKSPACE)
                log(f"  {seconds:.1f}s: {line}")
                results.append({"db": kind, "round": round_ + 1, "loader": loader, "seconds": seconds, "line": line})
                if loader == "import_recordings":  # again on the loaded database: everything skipped
                    seconds, line = timed(db, "import_recordings", str(source), "--workspace", WORKSPACE)
                    log(f"  re-run {seconds:.1f}s: {line}")
                    results.append({"db": kind, "round": round_ + 1, "loader": "import_recordings re-run",
                                    "seconds": seconds, "line": line})  # fmt: skip

    meta = {"started": started.isoformat(), "machine": machine(), "sessions": args.sessions,
            "segments_per_session": args.segments, "segments": segments,
            "loadavg_before": loadavg_before, "loadavg_after": os.getloadavg()}  # fmt: skip
    rows = [f"| {r['db']} | {r['round']} | {r['loader']} | {r['seconds']:.1f} | "
            f"{segments / r['seconds']:,.0f} | {r['line']} |" for r in results]  # fmt: skip
    table = "\n".join([
        f"{args.sessions:,} sessions, {segments:,} segments. Run {meta['started']} on {meta['machine']}; "
        f"load average before/after {loadavg_before[0]:.1f}/{meta['loadavg_after'][0]:.1f}.",
        "",
        "| database | round | loader | seconds | segments/s | its summary line |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])  # fmt: skip
    save_results(run_dir, meta, results, table)


if __name__ == "__main__":
    main()
