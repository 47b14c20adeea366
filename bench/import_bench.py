#!/usr/bin/env python3
"""Importer benchmark: `import_recordings` on a JSON Lines file beside `seed_demo`'s loader.

    python bench/import_bench.py                                # 3,000 sessions, both databases
    python bench/import_bench.py --sessions 600 --db sqlite     # a fifth of the size, SQLite only
    python bench/import_bench.py --sessions 300 --jobs 1 2      # the importer with 1 and with 2 workers

The file is seed_demo's own plan (`plan_session`, workspace `bench`, the fixed seed) written as
the import format, so both loaders write the same sessions, segments and boards. With
`--segments 320` a session has 320 committed segments and, when completed, a final revision of
about as many: 3,000 sessions make about 1.5 M segments. For each database, one run: a fresh,
migrated database per load, the importer and seed_demo alternating (`--rounds` repeats the
pair), and after each importer load a re-run of it on that database (everything skipped). Times are
the commands' wall clock, their final search-index upkeep included, and the CPU seconds they
used: the command's processes (its workers included) and, on PostgreSQL, the database server
processes serving its connections (sampled from /proc while it runs; the server's background
writers are not counted). On a machine shared with other work the CPU seconds are the figure
that compares; wall clock follows the machine's load. `--jobs 1 2` runs the importer once per
value (its `--jobs`), seed_demo with its default. SQLite under bench/data/, PostgreSQL database
connect_import_bench (dropped and re-created per load).
Results: a markdown table on stdout and in bench/results/import-<time>/results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
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


def count_segments(path: Path) -> int:
    with path.open("rb") as lines:
        return sum(len(r["committed"]) + len(r["final"] or []) for r in map(json.loads, lines))


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


class BackendCPU:
    """CPU seconds of the PostgreSQL server processes serving database `name`, sampled from
    /proc (a backend's title names its database) until `stop`; a backend that ends keeps its
    last sample, so up to one interval of its work is missed."""

    def __init__(self, name: str, interval: float = 0.2) -> None:
        self.marker, self.interval, self.seen = f" {name} ", interval, {}  # "postgres: 15/main: USER DB HOST…"
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self.done.wait(self.interval):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    if not title.startswith("postgres:") or self.marker not in title:
                        continue
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                self.seen[pid] = (int(fields[11]) + int(fields[12])) / tick

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return sum(self.seen.values())


def timed(db: Database, *args: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, the summary line) of one manage.py command."""
    backends = BackendCPU(PG_NAME) if db.kind == "postgres" else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=db.env(), text=True, capture_output=True)
    elapsed = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if backends is not None:
        cpu += backends.stop()
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return elapsed, cpu, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--segments", type=int, default=320, help="committed segments per session")
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=1, help="importer/seed_demo pairs per database")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1], help="the importer's --jobs, one load each")
    parser.add_argument("--no-seed-demo", action="store_true", help="time the importer only")
    parser.add_argument("--no-rerun", action="store_true", help="skip the re-run on the loaded database")
    parser.add_argument("--reuse-file", action="store_true",
                        help="load the file an earlier run generated for this size, if there is one")  # fmt: skip
    parser.add_argument("--pg-url", default=f"postgres://postgres@127.0.0.1:5432/{PG_NAME}")
    args = parser.parse_args()

    run_dir, started = new_run("import")
    DATA.mkdir(exist_ok=True)
    source = DATA / f"import-bench-{args.sessions}x{args.segments}.jsonl"
    if args.reuse_file and source.exists():
        log(f"reusing {source.relative_to(ROOT)}")
        segments = count_segments(source)
    else:
        log(f"generating {source.relative_to(ROOT)}")
        partial = source.with_suffix(f".{os.getpid()}.part")
        segments = generate(partial, sessions=args.sessions, segments=args.segments)
        partial.replace(source)  # whole, for a concurrent run's --reuse-file
    log(f"{args.sessions:,} sessions, {segments:,} segments, {source.stat().st_size / 1e6:.0f} MB")
    loadavg_before = os.getloadavg()
    results = []
    for kind in (["sqlite", "postgres"] if args.db == "both" else [args.db]):
        for round_ in range(args.rounds):
            loaders = [f"import_recordings --jobs {j}" for j in args.jobs]
            for loader in loaders + ([] if args.no_seed_demo else ["seed_demo"]):
                db = fresh_database(kind, args.pg_url)
                log(f"{kind} round {round_ + 1}: {loader} (load average {os.getloadavg()[0]:.1f})")
                load_before = os.getloadavg()[0]
                if loader == "seed_demo":
                    seconds, cpu, line = timed(db, "seed_demo", "--workspace", WORKSPACE, "--sessions",
                                               str(args.sessions), "--segments", str(args.segments),
                                               "--no-progress")  # fmt: skip
                else:
                    subprocess.run([PYTHON, "manage.py", "create_workspace", WORKSPACE], cwd=ROOT, env=db.env(),
                                   check=True, capture_output=True)  # fmt: skip
                    command = ["import_recordings", str(source), "--workspace", WORKSPACE, *loader.split()[1:]]
                    seconds, cpu, line = timed(db, *command)
                load = (load_before + os.getloadavg()[0]) / 2
                log(f"  {seconds:.1f}s, {cpu:.1f} CPU s: {line}")
                results.append({"db": kind, "round": round_ + 1, "loader": loader, "seconds": seconds, "cpu": cpu,
                                "load": load, "line": line})  # fmt: skip
                if loader.startswith("import_recordings") and not args.no_rerun:  # again: everything skipped
                    seconds, cpu, line = timed(db, *command)
                    log(f"  re-run {seconds:.1f}s, {cpu:.1f} CPU s: {line}")
                    results.append({"db": kind, "round": round_ + 1, "loader": f"{loader} re-run", "seconds": seconds,
                                    "cpu": cpu, "load": os.getloadavg()[0], "line": line})  # fmt: skip

    meta = {"started": started.isoformat(), "machine": machine(), "sessions": args.sessions,
            "segments_per_session": args.segments, "segments": segments,
            "loadavg_before": loadavg_before, "loadavg_after": os.getloadavg()}  # fmt: skip
    rows = [f"| {r['db']} | {r['round']} | {r['loader']} | {r['seconds']:.1f} | {segments / r['seconds']:,.0f} | "
            f"{r['cpu']:.1f} | {1e6 * r['cpu'] / segments:,.0f} | {r['load']:.1f} | {r['line']} |"
            for r in results]  # fmt: skip
    table = "\n".join([
        f"{args.sessions:,} sessions, {segments:,} segments. Run {meta['started']} on {meta['machine']}; "
        f"load average before/after {loadavg_before[0]:.1f}/{meta['loadavg_after'][0]:.1f}.",
        "",
        "| database | round | loader | seconds | segments/s | CPU s | CPU µs/segment | load avg | its summary line |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ])  # fmt: skip
    save_results(run_dir, meta, results, table)


if __name__ == "__main__":
    main()
