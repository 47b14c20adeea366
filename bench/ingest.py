"""Ingest benchmark: recorders writing through the ingest API on `serve --workers 2`, PostgreSQL
and Redis, while event streams and a webhook receiver watch; then a bulk load.

    .venv/bin/python bench/ingest.py                       # live (200 sessions, 500 streams, 60 s) and bulk
    .venv/bin/python bench/ingest.py --quick               # 15 s live with 50 sessions and 100 streams, 10 s bulk
    .venv/bin/python bench/ingest.py --in-process --root ../other-checkout   # CPU per append, A/B
    .venv/bin/python bench/ingest.py --in-process --root ../other-checkout --root-postgres-db connect_bench_other
                                                           # the same, each on a database it migrated itself

Live: `--sessions` sessions each append `--rate` committed segments per second in batches of
1 to 5 (random), from `--producers` processes; `--streams` SSE streams (from `--readers`
processes), each filtered to one session's `transcript.segment.created` (a viewer watching one
meeting); a webhook endpoint for `session.*` delivered to a receiver in this process. Measured:
append latency (request sent → answer read) p50/p99/max; send-to-stream latency (append sent →
the segment's frame read on a stream; an upper bound of commit-to-stream) and answer-to-stream
(answer read → frame read; a lower bound, negative when the stream was first); every appended
segment stored once and received once by every stream of its session; every session event
delivered to the receiver.

Bulk: `--bulk-producers` producers each append batches of 500 to their own session for
`--bulk-seconds`; segments per second stored.

In process (`--in-process`): the CPU time of one append of `--batch` segments with an
`Idempotency-Key` through Django's test client (the whole request: middleware, admission, the
view, the services, the outbox and the Redis announcement; no streams), PostgreSQL + Redis, this
checkout and, with `--root`, the one there, alternating round by round. Both share one database
unless `--root-postgres-db` gives the other its own: an A/B of migrations needs that (the live
run migrates a fresh database with the checkout that runs the script, so an A/B of migrations
runs the script from each checkout in turn, without `--root`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import cpu_split, harness, loop_probe  # noqa: E402

MARK = re.compile(rb"b#(\d+)#(\d+)#")
INGEST = "/api/v1/ingest/sessions/"


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


# --- reader: one process of asyncio streams -------------------------------------------------


def run_reader(args: argparse.Namespace) -> int:
    """Opens one stream per session id in `--sessions-file` (its line order), prints `ready`
    once every stream answered, records (stream, session, seq, time) until a line on stdin."""
    assignments = json.loads(Path(args.sessions_file).read_text())
    received: list[tuple[int, int, int, float]] = []
    statuses: dict[int, int] = {}

    async def one(i: int, session_id: str, ready: asyncio.Event) -> None:
        filters = quote(json.dumps([{"type": "transcript.segment.created", "sessionId": session_id}]))
        reader, writer = await asyncio.open_connection("127.0.0.1", args.port)
        writer.write((f"GET /api/v1/events/stream?filters={filters} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Authorization: Bearer {args.key}\r\nAccept: text/event-stream\r\n\r\n").encode())
        status_line = await reader.readline()
        statuses[i] = int(status_line.split()[1])
        if len(statuses) == len(assignments):
            ready.set()
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return
            now = time.time()
            for m in MARK.finditer(chunk):
                received.append((i, int(m.group(1)), int(m.group(2)), now))

    async def main() -> None:
        ready = asyncio.Event()
        tasks = [asyncio.create_task(one(i, s, ready)) for i, s in enumerate(assignments)]
        await asyncio.wait_for(ready.wait(), 120)
        print("ready", sum(1 for s in statuses.values() if s == 200), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for t in tasks:
            t.cancel()

    asyncio.run(main())
    Path(args.out).write_text(json.dumps({"statuses": statuses, "received": received}))
    return 0


# --- producer: one process of recorders ------------------------------------------------------


def run_producer(args: argparse.Namespace) -> int:
    """Each recorder on its own keep-alive connection, HTTP/1.1 written and read by hand: the
    load generator shares the machine with the server, and httpx's client took as much CPU per
    request as the server did, so the server was measured starved."""
    sessions = json.loads(Path(args.sessions_file).read_text())  # [[index, external id], …]
    records: list[tuple[int, int, int, float, float, int]] = []

    async def post(conn: list, path: str, body: bytes, idempotency_key: str) -> int:
        if conn[0] is None:
            conn[0], conn[1] = await asyncio.open_connection("127.0.0.1", args.port)
        reader, writer = conn
        writer.write((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {args.key}\r\n"
                      f"Content-Type: application/json\r\nIdempotency-Key: {idempotency_key}\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
        status = int(head.split(b" ", 2)[1])
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        if re.search(rb"(?i)\r\nconnection: *close", head):
            writer.close()
            conn[0] = conn[1] = None
        return status

    async def recorder(index: int, external_id: str) -> None:
        rng = random.Random(index)
        sequence = 0
        conn: list = [None, None]
        due = args.start_at + rng.uniform(0, 2.5 / args.rate)
        # Paced as planned, and never past the window (plus a grace for a slow server): bounded.
        while due < args.start_at + args.duration and time.time() < args.start_at + args.duration + 30:
            size = rng.randint(1, 5)
            due += size / args.rate
            await asyncio.sleep(max(0.0, due - time.time()))
            body = {"segments": [{"sequence": sequence + k, "timestampStart": (sequence + k) * 500,
                                  "timestampEnd": (sequence + k) * 500 + 400, "speakerLabel": "Speaker 1",
                                  "text": f"b#{index}#{sequence + k}# the quarterly numbers look fine", "confidence": 0.9}
                                 for k in range(size)]}
            sent = time.time()
            try:
                status = await post(conn, f"{INGEST}{external_id}/segments", json.dumps(body).encode(),
                                    f"{external_id}-{sequence}")
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ValueError):
                status = 0
                if conn[1] is not None:
                    conn[1].close()
                conn[0] = conn[1] = None
            answered = time.time()
            records.append((index, sequence, size, sent, answered, status))
            if status == 200:
                sequence += size

    async def main() -> None:
        await asyncio.gather(*(recorder(i, e) for i, e in sessions))

    asyncio.run(main())
    Path(args.out).write_text(json.dumps(records))
    return 0


# --- the run ---------------------------------------------------------------------------------


class Receiver(BaseHTTPRequestHandler):
    events: set[str] = set()
    deliveries = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).deliveries += 1
        type(self).events.add(body["id"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


SETUP = """
import json
from apps.tenancy import services as t
ws = t.create_workspace(slug="bench-ingest")
m = t.add_member(workspace=ws, email="bench@ingest.test")
print(json.dumps({"ingest": t.issue_ingest_key(membership=m).key,
                  "read": t.issue_api_key(membership=m, scopes=["svc:sessions:read", "svc:transcripts:read",
                                                                  "svc:webhooks:read", "svc:webhooks:write"]).key}))
"""
# The same batches of 500 through the service alone, in one process (no HTTP, no server): where
# the bulk path's time goes.
SERVICE_BULK = """
import time
from apps.recordings import services
from apps.recordings.services import SegmentInput
from apps.tenancy.models import Workspace
ws = Workspace.objects.get(slug="bench-ingest")
session, _ = services.put_external_session(workspace=ws, external_id="service-bulk")
sequence, end = 0, time.monotonic() + %(seconds)s
started = time.monotonic()
while time.monotonic() < end:
    batch = [SegmentInput(n, n + 1, f"bulk segment {sequence + n} of a long imported recording") for n in range(500)]
    services.append_sequenced_segments(session=session, first_sequence=sequence, segments=batch)
    sequence += 500
print(sequence / (time.monotonic() - started))
"""
COUNT = """
from apps.recordings.models import Segment
print(Segment.objects.filter(transcript__revision_kind="committed", transcript__session__external_id__startswith="%s").count())
"""


# One round in one checkout: `--requests` appends after a warm-up, CPU and wall time per request.
IN_PROCESS = """
import json, time, uuid
from django.test import Client
from apps.tenancy import services as t
size, count = %(batch)d, %(requests)d
slug = "cpu-" + uuid.uuid4().hex[:8]
ws = t.create_workspace(slug=slug)
key = t.issue_ingest_key(membership=t.add_member(workspace=ws, email=slug + "@ingest.test")).key
client, auth = Client(), {"Authorization": "Bearer " + key}
assert client.put("/api/v1/ingest/sessions/" + slug, data="{}", content_type="application/json",
                  headers=auth).status_code == 201
sequence = 0
def append():
    global sequence
    body = {"segments": [{"sequence": sequence + k, "timestampStart": (sequence + k) * 500,
                          "timestampEnd": (sequence + k) * 500 + 400, "speakerLabel": "Speaker 1",
                          "text": "the quarterly numbers look fine", "confidence": 0.9} for k in range(size)]}
    answer = client.post("/api/v1/ingest/sessions/" + slug + "/segments", data=json.dumps(body),
                         content_type="application/json", headers={**auth, "Idempotency-Key": slug + str(sequence)})
    assert answer.status_code == 200, answer.content
    sequence += size
for _ in range(30):
    append()
import os
from pathlib import Path
from django.db import connection
def backends():  # CPU seconds of this database's backends (the pool's connections)
    total, name = 0, " " + connection.settings_dict["NAME"] + " "
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().startswith(b"postgres: ") and \
                    name in (entry / "cmdline").read_bytes().replace(bytes(1), b" ").decode():
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total
backend = backends()
cpu, wall = time.process_time(), time.perf_counter()
for _ in range(count):
    append()
print(json.dumps({"cpu_ms": (time.process_time() - cpu) * 1000 / count,
                  "wall_ms": (time.perf_counter() - wall) * 1000 / count,
                  "backend_ms": (backends() - backend) * 1000 / count}))
"""


def in_process(args: argparse.Namespace) -> int:
    harness.ensure_postgres_database(args.postgres_db)
    db = harness.Database("postgres", f"postgres://postgres@127.0.0.1:5432/{args.postgres_db}", label="postgres",
                          extra_env={"REDIS_URL": f"redis://127.0.0.1:6379/{args.redis_db}"})
    harness.manage(db, "migrate", "-v", "0")
    # name -> (checkout, more environment, database): this checkout; another (--root), on its
    # own database when --root-postgres-db names one (migrated by that checkout: an A/B of
    # migrations), else on this one's; this one with a bench switch (--vs-env NAME=VALUE,
    # repeatable: one variant each).
    roots = {"this": (harness.ROOT, {}, db)}
    if args.root:
        other_db = db
        if args.root_postgres_db:
            harness.ensure_postgres_database(args.root_postgres_db)
            other_db = harness.Database("postgres", f"postgres://postgres@127.0.0.1:5432/{args.root_postgres_db}",
                                        label="postgres", extra_env=db.extra_env)
            harness.manage(other_db, "migrate", "-v", "0", root=Path(args.root).resolve())
        roots["other"] = (Path(args.root).resolve(), {}, other_db)
    for assignment in args.vs_env:
        name, _, value = assignment.partition("=")
        roots[f"this {assignment}"] = (harness.ROOT, {name: value}, db)
    code = IN_PROCESS % {"batch": args.batch, "requests": args.requests}
    figures: dict[str, list[dict]] = {name: [] for name in roots}
    for round_ in range(args.rounds):
        for name, (root, more, on) in (roots.items() if round_ % 2 == 0 else reversed(roots.items())):
            env = {**on.env(), "PYTHONPATH": str(root), **more}
            out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=root, env=env, text=True,
                                 capture_output=True, check=True).stdout
            figure = {**json.loads(out.strip().splitlines()[-1]), "load": os.getloadavg()[0]}
            figures[name].append(figure)
            harness.log(f"round {round_ + 1} {name} ({root}): {figure['cpu_ms']:.2f} ms CPU, "
                        f"{figure['backend_ms']:.2f} ms its PostgreSQL backends' CPU, "
                        f"{figure['wall_ms']:.1f} ms wall a request, load {figure['load']:.1f}")
    for name, rows in figures.items():
        cpu = sorted(r["cpu_ms"] for r in rows)
        backend = sorted(r["backend_ms"] for r in rows)
        print(f"{name}: CPU per request median {cpu[len(cpu) // 2]:.2f} ms (rounds: "
              + ", ".join(f"{r['cpu_ms']:.2f}" for r in rows) + f"); its backends' median {backend[len(backend) // 2]:.2f} ms ("
              + ", ".join(f"{r['backend_ms']:.2f}" for r in rows) + ")")
    return 0


def spawn(mode: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, mode, *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="15 s live with 50 sessions and 100 streams, 10 s bulk")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of live appends")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=2.0, help="segments per second per session")
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument("--producers", type=int, default=2, help="producer processes")
    parser.add_argument("--bulk-seconds", type=float, default=20.0)
    parser.add_argument("--bulk-producers", type=int, default=2)
    parser.add_argument("--postgres-db", default="connect_bench_ingest")
    parser.add_argument("--redis-db", type=int, default=5)
    parser.add_argument("--root", help="serve the Connect checked out there (another commit, for an A/B)")
    parser.add_argument("--in-process", action="store_true",
                        help="only the CPU per append request in process (no server), A/B with --root")
    parser.add_argument("--batch", type=int, default=3, help="--in-process: segments per append")
    parser.add_argument("--requests", type=int, default=300, help="--in-process: appends measured per round")
    parser.add_argument("--rounds", type=int, default=3, help="--in-process: rounds per checkout")
    parser.add_argument("--root-postgres-db", help="--in-process: the --root checkout's own database, migrated by "
                        "it (an A/B of migrations); by default both checkouts share --postgres-db")
    parser.add_argument("--vs-env", action="append", default=[], metavar="NAME=VALUE",
                        help="--in-process: also this checkout with a bench switch set (repeatable: one variant each)")
    parser.add_argument("--live-only", action="store_true", help="skip the bulk load")
    parser.add_argument("--profile", metavar="DIR",
                        help="record each server worker with py-spy during the live window (speedscope files in DIR)")
    parser.add_argument("--loop-probe", action="store_true",
                        help="bench/loop_probe.py in each server process: loop lag, long callbacks, full collections")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the server only (a bench switch); repeatable")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.sessions, args.streams, args.bulk_seconds = 15.0, 50, 100, 10.0
    if args.in_process:
        return in_process(args)

    import httpx
    import psycopg

    run_dir, started = harness.new_run("ingest")
    with psycopg.connect(harness.PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.postgres_db}" WITH (FORCE)')
    harness.ensure_postgres_database(args.postgres_db)
    db = harness.Database("postgres", f"postgres://postgres@127.0.0.1:5432/{args.postgres_db}", label="postgres",
                          extra_env={"REDIS_URL": f"redis://127.0.0.1:6379/{args.redis_db}"})
    subprocess.run(["redis-cli", "-n", str(args.redis_db), "flushdb"], check=False, capture_output=True)
    harness.manage(db, "migrate", "-v", "0")
    keys = json.loads(harness.manage(db, "shell", "-c", SETUP, capture=True).strip().splitlines()[-1])
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = {"CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE": str(args.streams + 10), "CONNECT_WEBHOOKS_ALLOW_PRIVATE": "1",
           "CONNECT_QUEUE_TIMEOUT_SECONDS": "30"}
    if args.loop_probe:
        (run_dir / "loop").mkdir()
        env["BENCH_LOOP_PROBE"] = str(run_dir / "loop")
    for assignment in args.server_env:
        name, _, value = assignment.partition("=")
        env[name] = value
    load_before = os.getloadavg()
    results: dict = {}
    with harness.connect_server(db, 2, env=env, root=Path(args.root) if args.root else None) as server:
        port = server.port
        read = httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {keys['read']}"}, timeout=60)
        ingest = httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {keys['ingest']}"}, timeout=60)
        hook = read.post("/api/v1/webhooks", json={
            "name": "bench", "url": f"http://127.0.0.1:{receiver.server_port}/hook",
            "filters": [{"type": "session.created"}, {"type": "session.status_changed"}]})
        assert hook.status_code == 201, hook.text
        ids = [ingest.put(f"{INGEST}live-{i}", json={"label": f"live {i}"}).json()["id"] for i in range(args.sessions)]

        # Streams: stream j watches session j % sessions.
        stream_sessions = [j % args.sessions for j in range(args.streams)]
        tmp = run_dir
        readers = []
        for r in range(args.readers):
            mine = [ids[s] for j, s in enumerate(stream_sessions) if j % args.readers == r]
            (tmp / f"reader-{r}.json").write_text(json.dumps(mine))
            readers.append(spawn("--reader", "--port", str(port), "--key", keys["read"], "--sessions-file",
                                 str(tmp / f"reader-{r}.json"), "--out", str(tmp / f"reader-{r}.out")))
        connected = sum(int(p.stdout.readline().split()[1]) for p in readers)
        harness.log(f"{connected}/{args.streams} streams connected")
        start_at = time.time() + 3
        producers = []
        for k in range(args.producers):
            mine = [[i, f"live-{i}"] for i in range(args.sessions) if i % args.producers == k]
            (tmp / f"producer-{k}.json").write_text(json.dumps(mine))
            producers.append(spawn("--producer", "--port", str(port), "--key", keys["ingest"], "--sessions-file",
                                   str(tmp / f"producer-{k}.json"), "--out", str(tmp / f"producer-{k}.out"),
                                   "--start-at", str(start_at), "--duration", str(args.duration),
                                   "--rate", str(args.rate)))
        split = cpu_split.CpuSplit(server_pid=server.proc.pid, database=args.postgres_db, clients={
            "benchmark: producers": [p.pid for p in producers],
            "benchmark: stream readers": [p.pid for p in readers],
            "benchmark: main (webhook receiver, samplers)": [os.getpid()]})
        time.sleep(max(0.0, start_at - time.time()))
        split.start()
        profilers = profile(server, args, start_at) if args.profile else []
        cpu_before = harness.cpu_seconds(server.proc.pid)
        for p in producers:
            p.wait()
        time.sleep(5)  # the last frames in flight
        server_cpu = harness.cpu_seconds(server.proc.pid) - cpu_before
        results["cpu_split"] = split.stop()
        window = (start_at, time.time())
        for p in profilers:
            p.wait()
        for i in range(args.sessions):
            ingest.post(f"{INGEST}live-{i}/status", json={"status": "completed"})
        records = [r for k in range(args.producers) for r in json.loads((tmp / f"producer-{k}.out").read_text())]
        for p in readers:
            p.stdin.write("stop\n")
            p.stdin.flush()
        results["live"] = live_results(args, records, readers, tmp, stream_sessions)
        # The servers' CPU (workers and task cluster) from the producers' start to 5 s after
        # their end, per append request: the figure a busy machine disturbs least.
        results["live"]["server_cpu_s"] = server_cpu
        results["live"]["server_cpu_ms_per_append"] = 1000 * server_cpu / max(1, results["live"]["ok"])
        results["live"]["stored"] = int(harness.manage(db, "shell", "-c", COUNT % "live-", capture=True).split()[-1])
        expected_hooks = 2 * args.sessions
        deadline = time.time() + 120
        while len(Receiver.events) < expected_hooks and time.time() < deadline:
            time.sleep(1)
        results["live"]["webhook_events"] = [len(Receiver.events), expected_hooks, Receiver.deliveries]
        if args.loop_probe:
            results["loop_probe"] = loop_probe.summary(run_dir / "loop", *window)
        if not args.live_only:
            results["bulk"] = bulk(server.base, keys["ingest"], args)
            stored = harness.manage(db, "shell", "-c", COUNT % "bulk-", capture=True)
            results["bulk"]["stored"] = int(stored.split()[-1])
            service = harness.manage(db, "shell", "-c", SERVICE_BULK % {"seconds": args.bulk_seconds / 2},
                                     capture=True)
            results["bulk"]["service_segments_per_s"] = float(service.split()[-1])
    meta = {"started": started.isoformat(), "machine": harness.machine(), "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(), "args": vars(args)}
    harness.save_results(run_dir, meta, results, table(meta, results))
    receiver.shutdown()
    return 0


def profile(server, args, start_at: float) -> list[subprocess.Popen]:
    """py-spy on each of the server's Python processes for the live window (from 5 s in), sampling
    the thread that holds the GIL only: Python's CPU, not its waits."""
    out = Path(args.profile)
    out.mkdir(parents=True, exist_ok=True)
    time.sleep(max(0.0, start_at + 5 - time.time()))
    pids = harness.descendants(server.proc.pid)
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    return [subprocess.Popen([py_spy, "record", "--pid", str(pid), "--rate", "100", "--gil",
                              "--duration", str(int(max(5, args.duration - 10))), "--format", "speedscope",
                              "--output", str(out / f"{pid}.speedscope.json")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for pid in pids]


def live_results(args, records, readers, tmp: Path, stream_sessions: list[int]) -> dict:
    for p in readers:
        p.wait(timeout=args.duration + 200)
    ok = [r for r in records if r[5] == 200]
    sent_at: dict[tuple[int, int], tuple[float, float]] = {}
    for index, first, size, sent, answered, _ in ok:
        for k in range(size):
            sent_at[(index, first + k)] = (sent, answered)
    appended_by_session: dict[int, int] = {}
    for index, first, size, *_ in ok:
        appended_by_session[index] = max(appended_by_session.get(index, 0), first + size)
    send_to_stream, answer_to_stream, duplicates, missing = [], [], 0, 0
    stream_no = 0
    for r in range(args.readers):
        out = json.loads((tmp / f"reader-{r}.out").read_text())
        mine = [s for j, s in enumerate(stream_sessions) if j % args.readers == r]
        seen: dict[int, set[int]] = {i: set() for i in range(len(mine))}
        for i, index, seq, at in out["received"]:
            if seq in seen[i]:
                duplicates += 1
                continue
            seen[i].add(seq)
            if (index, seq) in sent_at:
                sent, answered = sent_at[(index, seq)]
                send_to_stream.append((at - sent) * 1000)
                answer_to_stream.append((at - answered) * 1000)
        for i, session in enumerate(mine):
            missing += appended_by_session.get(session, 0) - len(seen[i])
        stream_no += len(mine)
    latencies = [(r[4] - r[3]) * 1000 for r in ok]
    return {
        "requests": len(records), "ok": len(ok), "errors": len(records) - len(ok),
        "appended": sum(r[2] for r in ok),
        # Over the time the appends took (the planned window, or longer when the server lagged).
        "segments_per_s": sum(r[2] for r in ok) / max(args.duration, max((r[4] for r in ok), default=0)
                                                      - min((r[3] for r in ok), default=0)),
        "append_ms": [pct(latencies, 50), pct(latencies, 99), max(latencies, default=float("nan"))],
        "send_to_stream_ms": [pct(send_to_stream, 50), pct(send_to_stream, 99), max(send_to_stream, default=0)],
        "answer_to_stream_ms": [pct(answer_to_stream, 50), pct(answer_to_stream, 99)],
        "frames": len(send_to_stream), "stream_missing": missing, "stream_duplicates": duplicates,
        "streams": stream_no,
    }


def bulk(base: str, key: str, args) -> dict:
    import httpx

    counts = [0] * args.bulk_producers
    latencies: list[float] = []

    def producer(k: int) -> None:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
            client.put(f"{INGEST}bulk-{k}", json={"label": "bulk"})
            sequence, end = 0, time.monotonic() + args.bulk_seconds
            while time.monotonic() < end:
                body = {"segments": [{"sequence": sequence + n, "timestampStart": n, "timestampEnd": n + 1,
                                      "text": f"bulk segment {sequence + n} of a long imported recording"}
                                     for n in range(500)]}
                sent = time.monotonic()
                response = client.post(f"{INGEST}bulk-{k}/segments", json=body)
                latencies.append((time.monotonic() - sent) * 1000)
                assert response.status_code == 200, response.text
                sequence += 500
                counts[k] = sequence

    started = time.monotonic()
    threads = [threading.Thread(target=producer, args=(k,)) for k in range(args.bulk_producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    return {"segments": sum(counts), "seconds": elapsed, "segments_per_s": sum(counts) / elapsed,
            "batch_ms": [pct(latencies, 50), pct(latencies, 99)]}


def table(meta: dict, results: dict) -> str:
    live, bulk_ = results["live"], results.get("bulk")
    lines = [
        harness.run_line(meta),
        "",
        "| live | value | target |",
        "|---|---|---|",
        f"| appends (requests ok / all) | {live['ok']} / {live['requests']} | all ok |",
        f"| segments appended / stored | {live['appended']} / {live['stored']} | equal |",
        f"| segments per second stored / offered | {live['segments_per_s']:.0f} / "
        f"{meta['args']['sessions'] * meta['args']['rate']:.0f} | equal |",
        f"| append p50 / p99 / max (ms) | {live['append_ms'][0]:.1f} / {live['append_ms'][1]:.1f} / "
        f"{live['append_ms'][2]:.1f} | p99 ≤ 50 |",
        f"| send-to-stream p50 / p99 / max (ms) | {live['send_to_stream_ms'][0]:.1f} / "
        f"{live['send_to_stream_ms'][1]:.1f} / {live['send_to_stream_ms'][2]:.1f} | p99 ≤ 250 (commit-to-stream) |",
        f"| answer-to-stream p50 / p99 (ms) | {live['answer_to_stream_ms'][0]:.1f} / "
        f"{live['answer_to_stream_ms'][1]:.1f} | (lower bound) |",
        f"| streams; frames missed / duplicated | {live['streams']}; {live['stream_missing']} / "
        f"{live['stream_duplicates']} | 0 / 0 |",
        f"| webhook events received / expected (deliveries) | {live['webhook_events'][0]} / "
        f"{live['webhook_events'][1]} ({live['webhook_events'][2]}) | equal |",
        f"| server CPU per append request (ms; workers and task cluster) | "
        f"{live['server_cpu_ms_per_append']:.2f} | |",
        "",
    ]
    if "cpu_split" in results:
        lines.append(cpu_split.table(results["cpu_split"], live["ok"]))
    for pid, probe in results.get("loop_probe", {}).items():
        lag, full = probe["lag_ms"], probe["gc_full"]
        lines.append(f"server process {pid}: loop lag p50 / p99 / p99.9 / max {lag['p50']:.1f} / {lag['p99']:.1f} / "
                     f"{lag['p999']:.1f} / {lag['max']:.1f} ms, ticks late > 20 ms {lag['over_20']}, > 50 ms "
                     f"{lag['over_50']} of {lag['samples']}; full collections {full['count']} "
                     f"({full['total_ms']:.0f} ms, max {full['max_ms']:.1f}, {full['on_loop']} on the loop); "
                     f"thread CPU s (life) {probe['threads_cpu_s_life']}; collections (life) {probe['gc_totals_life']}")
        a = probe["appends"]
        lines.append(f"    appends {a['count']}: in the server p50 / p99 {a['in_server_ms'][0]:.1f} / {a['in_server_ms'][1]:.1f} ms; "
                     f"on the lane {a['on_lane_ms'][0]:.1f} / {a['on_lane_ms'][1]:.1f} (its CPU {a['lane_cpu_ms'][0]:.1f} / "
                     f"{a['lane_cpu_ms'][1]:.1f}); off the lane {a['off_lane_ms'][0]:.1f} / {a['off_lane_ms'][1]:.1f}")
        for what, count, wall, cpu, longest in probe["long_callbacks"][:8]:
            lines.append(f"    long callback {what}: {count}×, {wall:.0f} ms wall ({cpu:.0f} CPU), max {longest:.1f}")
    lines.append("")
    if bulk_ is None:
        return "\n".join(lines)
    return "\n".join(lines + [
        "| bulk (batches of 500) | value | target |",
        "|---|---|---|",
        f"| segments per second | {bulk_['segments_per_s']:.0f} | ≥ 5,000 |",
        f"| segments appended / stored | {bulk_['segments']} / {bulk_['stored']} | equal |",
        f"| batch p50 / p99 (ms) | {bulk_['batch_ms'][0]:.0f} / {bulk_['batch_ms'][1]:.0f} | |",
        f"| reference: the service alone, one process, segments per second | "
        f"{bulk_['service_segments_per_s']:.0f} | |",
        "",
    ])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("--reader", "--producer"):
        mode = sys.argv.pop(1)
        sub = argparse.ArgumentParser()
        for name in ("--port", "--key", "--sessions-file", "--out"):
            sub.add_argument(name, required=True)
        sub.add_argument("--start-at", type=float)
        sub.add_argument("--duration", type=float)
        sub.add_argument("--rate", type=float)
        sys.exit(run_reader(sub.parse_args()) if mode == "--reader" else run_producer(sub.parse_args()))
    sys.exit(main())
