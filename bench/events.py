"""The event log under load (issue 21): `GET /api/v1/events?after=…&limit=100` over a log of
`--events` events per workspace, against the sessions list in the same run, and a poller's
commit-to-receipt lag against a producer.

    .venv/bin/python bench/events.py                      # SQLite: bench/data/events.sqlite3
    .venv/bin/python bench/events.py --postgres            # PostgreSQL: connect_eventlog_bench
    .venv/bin/python bench/events.py --events 100000 --quick
    .venv/bin/python bench/events.py --postgres --reuse --baseline 81b8b7d   # A/B on a seeded database
    # PostgreSQL, seeded outside the bench lock: one workspace alone in its own database, ten in another
    .venv/bin/python bench/events.py --postgres --db-name connect_eventlog_one --workspaces 1 --seed-only
    .venv/bin/python bench/events.py --postgres --seed-only
    flock /tmp/bench.lock .venv/bin/python bench/events.py --postgres --reuse --alone-db connect_eventlog_one

Phases, one `serve --workers 2` each:
1. one workspace's log (`--events`, bulk-inserted: ids spread over the last 20 hours, 90 %
   segment events, positions in insertion order) — p50 at 1 connection of pages after random
   places (`pos_` cursors, as a poller sends them), and req/s at 32 connections against
   `GET /api/v1/sessions?limit=100` (and `limit=20`);
2. nine more workspaces of the same size — the same page reads of the first workspace (the
   target: within 1.5x of phase 1);
3. a producer recording 100 events/s through the service while a poller follows `nextCursor`
   every 250 ms: lag from each event's commit to the poll that returned it (p50, p99, max).

`--baseline REF` (on a database already seeded, `--reuse`): this tree's server and REF's, side by
side on the same database, the same pages alternately in each round (after checking that both
answer every sampled page with the same parsed JSON).

Results go to bench/results/events-<time>/ and a table on stdout for bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.events.positions import CROCKFORD, Position, encode_position  # noqa: E402 - pure module
from bench.harness import (  # noqa: E402
    DATA,
    Database,
    Endpoint,
    connect_server,
    baseline_worktree,
    cpu_seconds,
    ensure_postgres_database,
    log,
    machine,
    manage,
    new_run,
    sanity_check,
    save_results,
    wrk,
)

SQLITE_PATH = DATA / "events.sqlite3"
PG_NAME = "connect_eventlog_bench"
WORKSPACES = 10
SPREAD_MS = 20 * 3600 * 1000  # inside the 24 h segment retention: every cursor is still served
BATCH = 20_000
COLUMNS = "id, workspace_id, type, session_id, occurred_at, data, position"
SEGMENT_DATA = {
    "sessionId": "", "occurredAt": "2026-11-25T00:00:00.000Z", "id": "", "sequence": 0, "timestampStart": 1000,
    "timestampEnd": 2500, "speakerLabel": "Speaker 1",
    "text": "We should move the launch to next quarter so the budget review can land first.",
    "confidence": 0.93, "createdAt": "2026-11-25T00:00:00.000Z",
}


def event_id(ms: int, rand: int) -> str:
    value = (ms << 80) | rand
    chars = []
    for _ in range(26):
        chars.append(CROCKFORD[value & 31])
        value >>= 5
    return "evt_" + "".join(reversed(chars))


def database(postgres: bool, pg_name: str = PG_NAME) -> Database:
    if postgres:
        ensure_postgres_database(pg_name)
        return Database("postgres", f"postgres://postgres@127.0.0.1:5432/{pg_name}", label="postgres")
    DATA.mkdir(parents=True, exist_ok=True)
    return Database("sqlite", f"sqlite:///{SQLITE_PATH}", sqlite_path=SQLITE_PATH, label="sqlite")


def workspace_and_key(db: Database, slug: str) -> tuple[str, str]:
    try:
        manage(db, "create_workspace", slug, "--name", slug, capture=True)
    except subprocess.CalledProcessError:  # --reuse: it exists
        pass
    manage(db, "add_member", slug, f"bench@{slug}.example", "--password", "bench-password-1", capture=True)
    key = manage(db, "issue_api_key", slug, "--member", f"bench@{slug}.example", "--scopes",
                 "svc:sessions:read,svc:transcripts:read", "--name", "bench", capture=True).strip().splitlines()[-1]
    workspace_id = manage(db, "shell", "-c", f"from apps.tenancy.models import Workspace; "
                          f"print(Workspace.objects.get(slug='{slug}').id)", capture=True).strip().splitlines()[-1]
    return workspace_id, key


def rows_for(workspace_id: str, count: int, now_ms: int):
    rng = random.Random(workspace_id)
    start = now_ms - SPREAD_MS
    step = SPREAD_MS / count
    for i in range(count):
        ms = int(start + i * step)
        session = f"bench-session-{i // 500}"
        if i % 10 == 0:
            type_, data = "session.status_changed", {"sessionId": session, "status": "processing",
                                                     "previousStatus": "recording", "occurredAt": "2026-11-25T00:00:00.000Z"}
        else:
            type_, data = "transcript.segment.created", {**SEGMENT_DATA, "sessionId": session, "id": f"seg{i}",
                                                          "sequence": i % 500}
        yield event_id(ms, rng.getrandbits(79) + i), type_, session, ms, json.dumps(data)


def seed_events(db: Database, workspace_id: str, count: int) -> None:
    """Bulk inserts (the benchmark's seed, not the service's write path). SQLite positions run on
    from the largest; PostgreSQL's are each batch's own transaction id, as record_event gives."""
    now_ms = int(time.time() * 1000)
    started = time.monotonic()
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.sqlite_path)
        position = conn.execute('SELECT COALESCE(MAX("position"), 0) FROM events_event').fetchone()[0]
        rows = rows_for(workspace_id, count, now_ms)
        while chunk := [r for _, r in zip(range(BATCH), rows)]:
            batch = [(eid, workspace_id, type_, session, _iso(ms), data, position + n + 1)
                     for n, (eid, type_, session, ms, data) in enumerate(chunk)]
            position += len(batch)
            conn.executemany(f"INSERT INTO events_event ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", batch)
            conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(db.url) as conn:
            rows = rows_for(workspace_id, count, now_ms)
            while chunk := [r for _, r in zip(range(BATCH * 5), rows)]:
                with conn.transaction():
                    position = conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
                    with conn.cursor().copy(f"COPY events_event ({COLUMNS}) FROM STDIN") as copy:
                        for eid, type_, session, ms, data in chunk:
                            copy.write_row((eid, workspace_id, type_, session, _iso(ms), data, position))
            conn.execute("ANALYZE events_event")
    log(f"seeded {count:,} events in {workspace_id} in {time.monotonic() - started:.0f} s")


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}+00:00"


def sample_cursors(db: Database, workspace_id: str, n: int = 300) -> list[str]:
    """`pos_` cursors of random events of the workspace, each with at least 100 events after it."""
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.sqlite_path)
        total = conn.execute("SELECT COUNT(*) FROM events_event WHERE workspace_id = ?", [workspace_id]).fetchone()[0]
        offsets = sorted(random.Random(1).sample(range(max(1, total - 200)), n))
        rows = [conn.execute('SELECT "position", id FROM events_event WHERE workspace_id = ? ORDER BY "position", id '
                             "LIMIT 1 OFFSET ?", [workspace_id, o]).fetchone() for o in offsets]
        conn.close()
    else:
        import psycopg

        with psycopg.connect(db.url) as conn:
            rows = conn.execute("SELECT position, id FROM events_event WHERE workspace_id = %s ORDER BY random() LIMIT %s",
                                [workspace_id, n]).fetchall()
    out = []
    for position, eid in rows:
        ms = 0
        for c in eid[4:14]:
            ms = ms * 32 + CROCKFORD.index(c)
        out.append(encode_position(Position(position, eid, ms)))
    return out


def measure(server, key: str, cursors: list[str], duration: float) -> dict:
    headers = {"Authorization": f"Bearer {key}"}
    events = Endpoint("events", "connect", [f"/api/v1/events?after={c}&limit=100" for c in cursors], headers,
                      "items=100")
    sessions100 = Endpoint("sessions", "connect", ["/api/v1/sessions?limit=100"], headers, "")
    sessions20 = Endpoint("sessions20", "connect", ["/api/v1/sessions?limit=20"], headers, "")
    problem = sanity_check(server.base, events)
    if problem:
        raise RuntimeError(f"events endpoint not sane: {problem}")
    result = {"events_1c": wrk(server.base, events, duration, 1, 1)}
    # Alternated, so drift of a shared machine falls on both.
    for round_ in range(2):
        result[f"events_32c_{round_}"] = wrk(server.base, events, duration, 32, 2)
        result[f"sessions100_32c_{round_}"] = wrk(server.base, sessions100, duration, 32, 2)
        result[f"sessions20_32c_{round_}"] = wrk(server.base, sessions20, duration, 32, 2)
    for value in result.values():
        value.pop("wrk_output", None)
    return result


def endpoints(key: str, cursors: list[str]) -> dict[str, Endpoint]:
    headers = {"Authorization": f"Bearer {key}"}
    return {
        "events": Endpoint("events", "connect", [f"/api/v1/events?after={c}&limit=100" for c in cursors], headers,
                           "items=100"),
        "sessions100": Endpoint("sessions", "connect", ["/api/v1/sessions?limit=100"], headers, ""),
        "sessions20": Endpoint("sessions20", "connect", ["/api/v1/sessions?limit=20"], headers, ""),
    }


def same_pages(servers: dict, key: str, cursors: list[str]) -> None:
    """Every sampled page, from each server: the same parsed JSON (and a full page), or stop."""
    import httpx

    clients = {label: httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
               for label, server in servers.items()}
    for cursor in cursors:
        bodies = {label: c.get("/api/v1/events", params={"after": cursor, "limit": 100}).json()
                  for label, c in clients.items()}
        first = next(iter(bodies.values()))
        if len(first["items"]) != 100 or any(body != first for body in bodies.values()):
            raise RuntimeError(f"the servers answer after={cursor} differently")
    for c in clients.values():
        c.close()
    log(f"{len(cursors)} pages: the same parsed JSON from {', '.join(servers)}")


def measure_ab(servers: dict, key: str, cursors: list[str], duration: float, rounds: int) -> dict:
    """Each round: p50 at 1 connection and req/s at 32 of the events pages, then the sessions
    lists, on each server in turn (the order swapped each round)."""
    eps = endpoints(key, cursors)
    for server in servers.values():
        problem = sanity_check(server.base, eps["events"])
        if problem:
            raise RuntimeError(f"events endpoint not sane: {problem}")
    same_pages(servers, key, cursors)
    result: dict = {label: {} for label in servers}

    def run(label: str, endpoint: Endpoint, connections: int) -> dict:
        # With the server's CPU per request (its processes, read from /proc): the figure a busy
        # machine disturbs least.
        server = servers[label]
        before = cpu_seconds(server.proc.pid)
        out = wrk(server.base, endpoint, duration, connections, 1 if connections == 1 else 2)
        out["cpu_ms_per_request"] = (cpu_seconds(server.proc.pid) - before) * 1000 / max(1, out["requests"])
        return out

    for round_ in range(rounds):
        order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
        for label in order:
            result[label][f"events_1c_{round_}"] = run(label, eps["events"], 1)
            for name in ("events", "sessions100", "sessions20"):
                result[label][f"{name}_32c_{round_}"] = run(label, eps[name], 32)
            log(f"round {round_} {label}: events p50 {result[label][f'events_1c_{round_}']['p50_ms']:.1f} ms, "
                f"{result[label][f'events_32c_{round_}']['rps']:.0f} req/s; sessions100 "
                f"{result[label][f'sessions100_32c_{round_}']['rps']:.0f}, sessions20 "
                f"{result[label][f'sessions20_32c_{round_}']['rps']:.0f}")
    for values in result.values():
        for value in values.values():
            value.pop("wrk_output", None)
    return result


def ab_summary(results: dict, rounds: int) -> str:
    ab = results["ab"]

    def mean(label: str, name: str, field: str = "rps") -> float:
        return statistics.mean(ab[label][f"{name}_{r}"][field] for r in range(rounds))

    lines = [f"{results['database']}, {results['events_per_workspace']:,} events per workspace "
             f"({results['workspaces']} workspaces), {results['machine']}; {rounds} rounds, means",
             "| server | events p50 @1c (ms) | events CPU ms/request @1c | events req/s @32c | "
             "sessions?limit=100 req/s | sessions?limit=20 req/s | events / sessions100 | events / sessions20 | "
             "CPU ms/request @32c: events, sessions100, sessions20 | non-2xx |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for label in ab:
        errors = sum(v["non_2xx"] + v["socket_errors"] for v in ab[label].values())
        p50 = mean(label, "events_1c", "p50_ms")
        e, s100, s20 = mean(label, "events_32c"), mean(label, "sessions100_32c"), mean(label, "sessions20_32c")
        cpu = [mean(label, f"{n}_32c", "cpu_ms_per_request") for n in ("events", "sessions100", "sessions20")]
        lines.append(f"| {label} | {p50:.1f} | {mean(label, 'events_1c', 'cpu_ms_per_request'):.2f} | {e:.0f} | "
                     f"{s100:.0f} | {s20:.0f} | {e / s100:.2f} | {e / s20:.2f} | "
                     f"{', '.join(f'{c:.2f}' for c in cpu)} | {errors} |")
    return "\n".join(lines)


def lag_run(db: Database, server, key: str, workspace_id: str, seconds: float, rate: float = 100,
            interval: float = 0.25) -> dict:
    """A producer recording `rate` events/s through record_event (each its own transaction) and a
    poller following nextCursor every `interval`: the lag from commit to the poll that got it."""
    os.environ.update(db.env())
    import django

    django.setup()
    import httpx
    from django.db import connection, transaction
    from django.utils import timezone

    from apps.events.services import record_event

    committed: dict[str, float] = {}
    arrivals: dict[str, float] = {}
    stop = threading.Event()

    def produce() -> None:
        next_at = time.monotonic()
        n = 0
        while not stop.is_set():
            with transaction.atomic():
                event = record_event(workspace_id=workspace_id, type="session.status_changed", session_id=f"lag-{n}",
                                     occurred_at=timezone.now(), data={"sessionId": f"lag-{n}", "status": "completed"})
            committed[event.id] = time.monotonic()
            n += 1
            next_at += 1 / rate
            time.sleep(max(0.0, next_at - time.monotonic()))
        connection.close()

    client = httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    cursor = client.get("/api/v1/events", params={"type": "session.status_changed", "limit": 1,
                                                  "after": sample_cursors(db, workspace_id, 1)[0]}).json()["nextCursor"]
    # Catch up to now first (the seeded log), then start producing.
    while True:
        page = client.get("/api/v1/events", params={"after": cursor, "limit": 100, "type": "session.status_changed"}).json()
        cursor = page["nextCursor"]
        if not page["items"]:
            break
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    deadline = time.monotonic() + seconds
    polls = 0
    # Until the producer has stopped and every event it committed came (or 30 s more).
    while not stop.is_set() or producer.is_alive() or not committed.keys() <= arrivals.keys():
        page = client.get("/api/v1/events", params={"after": cursor, "limit": 100,
                                                    "type": "session.status_changed"}).json()
        now = time.monotonic()
        polls += 1
        cursor = page["nextCursor"]
        for item in page["items"]:
            # Every arrival, matched with its commit afterwards: a poll can return an event before
            # the producer thread has noted its commit time.
            arrivals.setdefault(item["id"], now)
        if now >= deadline:
            stop.set()
        if now > deadline + 30:
            break
        if len(page["items"]) < 100:
            time.sleep(interval)
    producer.join()
    # Anything not received by then: a skip, or held behind an older transaction of the cluster
    # (the horizon)? Keep following the cursor a minute more and count what still comes.
    missing = set(committed) - set(arrivals)
    late = 0
    give_up = time.monotonic() + 60
    while missing and time.monotonic() < give_up:
        page = client.get("/api/v1/events", params={"after": cursor, "limit": 100,
                                                    "type": "session.status_changed"}).json()
        cursor = page["nextCursor"]
        for item in page["items"]:
            if item["id"] in missing:
                missing.discard(item["id"])
                late += 1
        time.sleep(interval)
    if missing:
        from apps.events.models import Event

        log(f"never received: {sorted(missing)}; cursor {cursor}; rows: "
            f"{list(Event.objects.filter(pk__in=missing).values_list('id', 'position', 'type'))}")
    lags = sorted(max(0.0, arrivals[i] - t) for i, t in committed.items() if i in arrivals)
    received = len(lags)
    return {
        "produced": len(committed), "received": received, "polls": polls,
        "received_later": late, "never_received": len(missing),
        "lag_p50_ms": 1000 * statistics.median(lags), "lag_p99_ms": 1000 * lags[int(0.99 * (len(lags) - 1))],
        "lag_max_ms": 1000 * lags[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--db-name", default=PG_NAME, help="with --postgres: the database to seed and read")
    parser.add_argument("--seed-only", action="store_true", help="seed every workspace, then stop")
    parser.add_argument("--baseline", help="with --reuse: a commit whose server is measured beside this tree's")
    parser.add_argument("--rounds", type=int, default=2, help="with --baseline")
    parser.add_argument("--redis", help="REDIS_URL for the servers (production's setup: rate limits counted there)")
    parser.add_argument("--events", type=int, default=1_000_000, help="events per workspace")
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--lag-seconds", type=float, default=60)
    parser.add_argument("--quick", action="store_true", help="short runs (a smoke test)")
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument("--lag-only", action="store_true", help="with --reuse: only the poller lag phase")
    parser.add_argument("--workspaces", type=int, default=WORKSPACES,
                        help="workspaces to seed (with --seed-only: 1 for an --alone-db database)")
    parser.add_argument("--alone-db", help="with --postgres --reuse: phase 1 (one workspace alone) reads this "
                        "database, seeded with --workspaces 1 --seed-only, so that no seeding runs under the lock")
    args = parser.parse_args()
    duration = 3 if args.quick else args.duration
    db = database(args.postgres, args.db_name)
    if args.redis:
        db.extra_env["REDIS_URL"] = args.redis
    run_dir, started = new_run("events")
    if not args.reuse:
        if db.kind == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{SQLITE_PATH}{suffix}").unlink(missing_ok=True)
        else:
            import psycopg

            from bench.harness import PG_ADMIN_URL

            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{args.db_name}"')
                conn.execute(f'CREATE DATABASE "{args.db_name}"')
        manage(db, "migrate", "--no-input", "-v", "0")
    # A/B and --reuse read only the first workspace (the others are seeded already, or only by
    # A/B's own phases): the others' keys, three manage commands each, would be unused.
    count = 1 if args.baseline or args.reuse else args.workspaces
    workspaces = [workspace_and_key(db, f"bench-ev-{i}") for i in range(count)]
    first_id, first_key = workspaces[0]
    if not args.reuse:
        manage(db, "seed_demo", "--workspace", "bench-ev-0", "--sessions", "150", "--segments", "2")
        seed_events(db, first_id, args.events)
    if args.seed_only:
        if not args.reuse:
            for workspace_id, _ in workspaces[1:]:
                seed_events(db, workspace_id, args.events)
        return
    results: dict = {"machine": machine(), "events_per_workspace": args.events,
                     "database": db.kind + (" + Redis" if args.redis else "")}
    if args.baseline:
        cursors = sample_cursors(db, first_id)
        results["workspaces"] = WORKSPACES
        with baseline_worktree(args.baseline, DATA / "events-baseline") as root, \
                connect_server(db, 2) as server, connect_server(db, 2, root=root) as baseline:
            results["ab"] = measure_ab({"connect": server, args.baseline: baseline}, first_key, cursors, duration,
                                       args.rounds)
        table = ab_summary(results, args.rounds)
        save_results(run_dir, {"started": started.isoformat(), "args": vars(args), "loadavg_after": os.getloadavg()},
                     results, table)
        return
    if args.lag_only:
        with connect_server(db, 2) as server:
            results["lag"] = lag_run(db, server, first_key, first_id, args.lag_seconds)
        print(lag_line(results["lag"]))
        return
    if args.alone_db:
        alone = database(True, args.alone_db)
        alone.extra_env.update(db.extra_env)
        alone_id, alone_key = workspace_and_key(alone, "bench-ev-0")
        with connect_server(alone, 2) as server:
            log(f"phase 1: one workspace alone (database {args.alone_db})")
            results["one_workspace"] = measure(server, alone_key, sample_cursors(alone, alone_id), duration)
    cursors = sample_cursors(db, first_id)
    if not args.alone_db:
        with connect_server(db, 2) as server:
            log("phase 1: one workspace")
            results["one_workspace"] = measure(server, first_key, cursors, duration)
    if not args.reuse:
        for workspace_id, _ in workspaces[1:]:
            seed_events(db, workspace_id, args.events)
    with connect_server(db, 2) as server:
        log("phase 2: ten workspaces")
        results["ten_workspaces"] = measure(server, first_key, cursors, duration)
        log("phase 3: poller lag against a 100 events/s producer")
        results["lag"] = lag_run(db, server, first_key, first_id, 10 if args.quick else args.lag_seconds)
    table = summary(results)
    save_results(run_dir, {"started": started.isoformat(), "args": vars(args), "loadavg_after": os.getloadavg()},
                 results, table)


def summary(results: dict) -> str:
    def rps(phase: str, name: str) -> float:
        return statistics.mean(results[phase][f"{name}_32c_{r}"]["rps"] for r in range(2))

    lines = [f"{results['database']}, {results['events_per_workspace']:,} events per workspace, {results['machine']}",
             "| phase | events p50 @1c (ms) | events req/s @32c | sessions?limit=100 req/s | sessions?limit=20 req/s | "
             "events / sessions100 | events / sessions20 | non-2xx |",
             "|---|---|---|---|---|---|---|---|"]
    for phase in ("one_workspace", "ten_workspaces"):
        p = results[phase]
        errors = sum(v["non_2xx"] + v["socket_errors"] for v in p.values())
        e, s100, s20 = rps(phase, "events"), rps(phase, "sessions100"), rps(phase, "sessions20")
        lines.append(f"| {phase} | {p['events_1c']['p50_ms']:.1f} | {e:.0f} | {s100:.0f} | {s20:.0f} | "
                     f"{e / s100:.2f} | {e / s20:.2f} | {errors} |")
    one, ten = results["one_workspace"]["events_1c"]["p50_ms"], results["ten_workspaces"]["events_1c"]["p50_ms"]
    lines.append(f"\nten workspaces / one alone, p50 @1c: {ten / one:.2f}")
    lines.append(lag_line(results["lag"]))
    return "\n".join(lines)


def lag_line(lag: dict) -> str:
    return (f"poller lag (100 events/s, 250 ms poll): produced {lag['produced']}, received {lag['received']} "
            f"within the run (+{lag.get('received_later', 0)} later, {lag.get('never_received', 0)} never), "
            f"p50 {lag['lag_p50_ms']:.0f} ms, p99 {lag['lag_p99_ms']:.0f} ms, max {lag['lag_max_ms']:.0f} ms")


if __name__ == "__main__":
    main()
