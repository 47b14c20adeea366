"""SSE benchmark: 1,000 concurrent `GET /api/v1/events/stream` readers while a separate producer
process commits 50 events/s for 60 s through the services (apps/recordings/services/transcripts.py:
`append_committed_segments`, one segment per transaction), and in the same run the same load
through nchan (nginx + libnginx-mod-nchan on loopback, EventSource subscribers, its HTTP
publish endpoint) as the fan-out reference.

    apt-get install -y nginx libnginx-mod-nchan      # the reference; the system nginx is not touched
    .venv/bin/python bench/sse.py                                  # both setups, 1,000 streams, 50/s, 60 s
    .venv/bin/python bench/sse.py --setups embedded --quick        # a 10 s smoke run with 200 streams

Setups: `embedded` (SQLite in a temporary directory, no Redis, `serve --workers 1`) and
`production` (PostgreSQL `--postgres-db`, Redis db `--redis-db`, `serve --workers 2`).

Measured per target, over the load window:
- delivered/expected per stream: every event committed while the stream was connected must
  arrive exactly once (missed and duplicates are counted per stream);
- commit-to-receipt latency p50/p99/max: the producer stamps each event with the wall time at
  which its transaction committed (a `transaction.on_commit` hook registered before the
  service call runs first); readers stamp the wall time at which the frame's last byte was
  read. For nchan the stamp is taken just before the publish POST is sent;
- server CPU (utime+stime of the daphne / nginx processes, /proc/<pid>/stat) and peak RSS
  (VmHWM, /proc/<pid>/status), and the readers' own CPU so a saturated reader shows.

Readers are `--readers` processes of asyncio Protocols on raw sockets (no per-event parsing
beyond a regex for the event's marker `bench#<n>#`, which the producer writes into the
segment text / the nchan message).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import ROOT, free_port, log  # noqa: E402
from tests.servers import descendants  # noqa: E402

STREAM = "/api/v1/events/stream"
MARK = re.compile(rb"bench#(\d+)#")
CLK_TCK = os.sysconf("SC_CLK_TCK")
NCHAN_MODULE = "/usr/lib/nginx/modules/ngx_nchan_module.so"
# Padding so an nchan message is about as large as Connect's transcript.segment.created frame.
FILLER = "Let's start with the roadmap for next quarter; the onboarding flow is the first thing to fix."


def raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


# --- /proc ------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14 and 15)


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def runqueue_wait_s(pid: int) -> float:
    """Seconds this process's threads spent runnable but waiting for a CPU (/proc/<pid>/task/*/schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


class Meter:
    """CPU seconds, run-queue wait and peak RSS of a fixed set of processes between start() and stop()."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def idle(self) -> None:
        """RSS before any stream opens."""
        self.idle_rss_mb = self.rss_mb()

    def rss_mb(self) -> float:
        return round(sum(status_kb(pid, "VmRSS") for pid in self.pids) / 1024, 1)

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.cpu0 = {pid: cpu_seconds(pid) for pid in self.pids}
        self.wait0 = {pid: runqueue_wait_s(pid) for pid in self.pids}

    def stop(self) -> dict:
        wall = time.monotonic() - self.t0
        cpu = sum(cpu_seconds(pid) - self.cpu0[pid] for pid in self.pids)
        wait = sum(runqueue_wait_s(pid) - self.wait0[pid] for pid in self.pids)
        return {
            "cpu_s": round(cpu, 2),
            "cpu_pct": round(100 * cpu / wall, 1),
            "runqueue_wait_pct": round(100 * wait / wall, 1),
            "rss_peak_mb": round(sum(status_kb(pid, "VmHWM") for pid in self.pids) / 1024, 1),
            "rss_peak_mb_per_process": [round(status_kb(pid, "VmHWM") / 1024, 1) for pid in self.pids],
            "rss_mb": round(sum(status_kb(pid, "VmRSS") for pid in self.pids) / 1024, 1),
            "rss_idle_mb": getattr(self, "idle_rss_mb", None),
            "processes": len(self.pids),
        }


# --- readers ---------------------------------------------------------------------------------
# Two interchangeable readers with one stdin protocol and one output format (OUT.meta, OUT.recv,
# OUT.cpu; see bench/sse_reader.c): the C one (epoll, default) and this asyncio one (`--reader
# python`, or when no C compiler is found).


def write_raw(out: str, status, connected_at, closed_at, duplicates, received: array, cpu: float, wall: float) -> None:
    Path(out + ".meta").write_text("".join(
        f"{s} {c:.6f} {e:.6f} {d}\n" for s, c, e, d in zip(status, connected_at, closed_at, duplicates)))
    Path(out + ".recv").write_bytes(received.tobytes())
    Path(out + ".cpu").write_text(f"{cpu:.4f} {wall:.4f}\n")


def summarize(out: str, size: int, commits: dict[int, float], latencies: array, first: array,
              last: array, steady: array | None = None, cutoff: float = 0.0) -> tuple[list[dict], float, float]:
    """Per stream: events committed while it was connected, how many of those arrived, duplicates.
    Per event (`first`, `last`): the earliest and latest receipt over all streams."""
    received = array("d")
    received.frombytes(Path(out + ".recv").read_bytes())
    cpu, wall = (float(x) for x in Path(out + ".cpu").read_text().split())
    ordered = sorted(commits.items())
    streams = []
    for i, line in enumerate(Path(out + ".meta").read_text().splitlines()):
        status, start, end, dups, *storm = line.split()
        start, end = float(start), float(end) or float("inf")
        reconnected_at, restatus = (float(storm[0]), int(storm[1])) if storm else (0.0, 0)
        base = i * size
        expected = got = 0
        if status == "200":
            for seq, t in ordered:
                if start <= t <= end:
                    expected += 1
                    at = received[base + seq]
                    if at:
                        got += 1
                        latencies.append(at - t)
                        if steady is not None and t < cutoff:
                            steady.append(at - t)
                        if not first[seq] or at < first[seq]:
                            first[seq] = at
                        if at > last[seq]:
                            last[seq] = at
        unknown = sum(1 for seq in range(size) if received[base + seq] and seq not in commits)
        streams.append({"status": int(status), "expected": expected, "delivered": got,
                        "closed_early": end != float("inf"), "duplicates": int(dups), "unknown": unknown,
                        "reconnected_at": reconnected_at, "reconnect_status": restatus})
    return streams, cpu, wall


def build_c_reader(tmp: Path) -> Path | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    binary = tmp / "sse_reader"
    subprocess.run([compiler, "-O2", "-o", str(binary), str(Path(__file__).with_name("sse_reader.c"))], check=True)
    return binary



def run_reader(args: argparse.Namespace) -> int:
    """Hold `--count` streams; on stdin `mark` start the CPU window, on `stop` write results."""
    import asyncio

    raise_nofile()
    request = (
        f"GET {args.path} HTTP/1.1\r\nHost: 127.0.0.1:{args.port}\r\nAccept: text/event-stream\r\n"
        + (f"Authorization: Bearer {args.key}\r\n" if args.key else "")
        + "\r\n"
    ).encode()
    size = args.max_seq
    connected_at = [0.0] * args.count
    closed_at = [0.0] * args.count
    status = [0] * args.count
    received = array("d", bytes(8 * size * args.count))
    duplicates = [0] * args.count

    class Client(asyncio.Protocol):
        def __init__(self, i: int, ready: asyncio.Future) -> None:
            self.i, self.ready, self.head, self.tail = i, ready, b"", b""

        def connection_made(self, transport) -> None:
            self.transport = transport
            transport.write(request)

        def data_received(self, data: bytes) -> None:
            now = time.time()
            if not connected_at[self.i]:
                self.head += data
                end = self.head.find(b"\r\n\r\n")
                if end < 0:
                    return
                status[self.i] = int(self.head.split(b" ", 2)[1])
                data, self.head = self.head[end + 4 :], b""
                connected_at[self.i] = now
                if not self.ready.done():
                    self.ready.set_result(status[self.i])
                if status[self.i] != 200:
                    self.transport.close()
                    return
            data = self.tail + data
            cut = data.rfind(b"\n\n")
            if cut < 0:
                self.tail = data
                return
            self.tail = data[cut + 2 :]
            base = self.i * size
            for match in MARK.finditer(data, 0, cut):
                seq = int(match.group(1))
                if seq < size:
                    if received[base + seq]:
                        duplicates[self.i] += 1
                    else:
                        received[base + seq] = now

        def connection_lost(self, exc) -> None:
            closed_at[self.i] = time.time()
            if not self.ready.done():
                self.ready.set_result(-1)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        commands: asyncio.Queue = asyncio.Queue()

        def stdin_lines() -> None:
            for line in sys.stdin:
                loop.call_soon_threadsafe(commands.put_nowait, line.strip())
            loop.call_soon_threadsafe(commands.put_nowait, "stop")

        threading.Thread(target=stdin_lines, daemon=True).start()
        gate = asyncio.Semaphore(args.ramp)
        transports = []

        async def open_one(i: int) -> None:
            async with gate:
                ready = loop.create_future()
                try:
                    transport, _ = await loop.create_connection(lambda: Client(i, ready), "127.0.0.1", args.port)
                    transports.append(transport)
                    await asyncio.wait_for(ready, 120)
                except (OSError, asyncio.TimeoutError):
                    status[i] = status[i] or -1

        t0 = time.monotonic()
        await asyncio.gather(*(open_one(i) for i in range(args.count)))
        ok = sum(1 for s in status if s == 200)
        print(json.dumps({"ready": ok, "of": args.count, "seconds": round(time.monotonic() - t0, 2),
                          "statuses": sorted({s for s in status})}), flush=True)
        cpu_mark = wall_mark = None
        while True:
            command = await commands.get()
            if command == "mark":
                cpu_mark, wall_mark = sum(os.times()[:2]), time.monotonic()
            elif command.startswith("stop"):
                break
        cpu = sum(os.times()[:2]) - (cpu_mark or 0)
        wall = time.monotonic() - (wall_mark or t0)
        for transport in transports:
            transport.abort()
        write_raw(args.out, status, connected_at, closed_at, duplicates, received, cpu, wall)

    asyncio.run(main())
    return 0


# --- producers (`_produce`, `_publish`) -------------------------------------------------------


def paced(rate: float, duration: float, t0: float | None = None, lane: int = 0, lanes: int = 1):
    """Event numbers on schedule (event n due at t0 + n / rate); `lane` of `lanes` takes every
    lanes-th one. A lane that falls behind runs back to back."""
    total = int(rate * duration)
    t0 = t0 if t0 is not None else time.monotonic() + 0.2
    for seq in range(lane, total, lanes):
        delay = t0 + seq / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield seq


def run_producer(args: argparse.Namespace) -> int:
    """Create `--sessions` sessions, print their ids, wait for `go` on stdin, then commit one
    segment per transaction at `--rate` for `--duration`; write {seq: commit wall time}.
    `--threads` lanes commit side by side (one database connection each, disjoint sessions when
    the session count is a multiple of the lanes), so one slow commit does not hold the pace."""
    import django

    django.setup()
    from django.db import connection, transaction

    from apps.recordings import services
    from apps.recordings.services import SegmentInput
    from apps.tenancy.models import Workspace

    workspace = Workspace.objects.get(slug=args.slug)
    sessions = [services.create_session(workspace=workspace, label=f"SSE bench {n}") for n in range(args.sessions)]
    print(json.dumps({"sessions": [s.id for s in sessions]}), flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    commits: dict[int, float] = {}
    started = time.monotonic()
    t0 = started + 0.2

    def lane(k: int) -> None:
        try:
            for seq in paced(args.rate, args.duration, t0, k, args.threads):
                session = sessions[seq % len(sessions)]
                n = seq // len(sessions)
                stamp: list[float] = []
                with transaction.atomic():
                    transaction.on_commit(lambda: stamp.append(time.time()))
                    services.append_committed_segments(
                        session=session,
                        segments=[SegmentInput(n * 4000, n * 4000 + 3500, f"bench#{seq}# {FILLER}", "Speaker 1", 0.93)],
                    )
                commits[seq] = stamp[0]
        finally:
            connection.close()

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    Path(args.out).write_text(json.dumps(commits))
    print(json.dumps({"events": len(commits), "seconds": round(elapsed, 2)}), flush=True)
    return 0


def run_publisher(args: argparse.Namespace) -> int:
    """nchan: POST one message per event to the publish endpoint at `--rate` for `--duration`."""
    import httpx

    if sys.stdin.readline().strip() != "go":
        return 1
    commits: dict[int, float] = {}
    started = time.monotonic()
    failures = []

    def lane(k: int) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{args.port}", timeout=10) as client:
            for seq in paced(args.rate, args.duration, started + 0.2, k, args.threads):
                body = json.dumps({"type": "transcript.segment.created", "sessionId": "ses_bench",
                                   "data": {"sequence": seq, "text": f"bench#{seq}# {FILLER}", "pad": "x" * 180}})
                t = time.time()
                response = client.post("/pub", content=body)
                if response.status_code in (200, 201, 202):
                    commits[seq] = t
                else:
                    failures.append(seq)

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    Path(args.out).write_text(json.dumps(commits))
    print(json.dumps({"events": len(commits), "failures": len(failures),
                      "seconds": round(time.monotonic() - started, 2)}), flush=True)
    return 0


# --- orchestration ----------------------------------------------------------------------------


def manage(env: dict, *args: str) -> str:
    out = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, text=True, capture_output=True)
    if out.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def setup_env(name: str, args: argparse.Namespace, tmp: Path) -> tuple[dict, int]:
    env = dict(os.environ)
    env.update(CONNECT_DEVELOPMENT="1", DJANGO_SETTINGS_MODULE="connect.settings", LOG_LEVEL="WARNING",
               PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1",
               CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE=str(args.streams + 100), CONNECT_SSE_STATS="1")
    env.pop("REDIS_URL", None)
    if name == "embedded":
        env["DATABASE_URL"] = f"sqlite:///{tmp / 'sse-bench.sqlite3'}"
        return env, 1
    subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(args.postgres_port), "-U", "postgres", "-c",
                    f"CREATE DATABASE {args.postgres_db}"], capture_output=True)
    env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:{args.postgres_port}/{args.postgres_db}"
    env["REDIS_URL"] = f"redis://127.0.0.1:6379/{args.redis_db}"
    return env, args.workers or 2


def prepare(env: dict) -> tuple[str, str]:
    slug = f"sse-{time.strftime('%H%M%S')}-{os.getpid()}"
    manage(env, "migrate", "-v0")
    manage(env, "create_workspace", slug)
    manage(env, "add_member", slug, f"bench-sse@{slug}.test")
    key = manage(env, "issue_api_key", slug, "--member", f"bench-sse@{slug}.test", "--scopes",
                 "svc:sessions:read,svc:transcripts:read", "--name", "bench-sse")
    return slug, key


def wait_http(url: str, process: subprocess.Popen, what: str) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.3)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_readers(args: argparse.Namespace, port: int, path: str, key: str, tmp: Path, label: str) -> list:
    readers = []
    share = [args.streams // args.readers + (1 if i < args.streams % args.readers else 0) for i in range(args.readers)]
    for i, count in enumerate(share):
        out = tmp / f"{label}-reader{i}"
        max_seq = int(args.rate * args.duration)
        if args.c_reader:
            command = [str(args.c_reader), str(port), path, key, str(count), str(max_seq), str(out), str(args.ramp)]
        else:
            command = [sys.executable, __file__, "_read", "--port", str(port), "--path", path, "--count", str(count),
                       "--max-seq", str(max_seq), "--out", str(out), "--ramp", str(args.ramp)]
            if key:
                command += ["--key", key]
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        readers.append((process, out))
    seconds = 0.0
    for process, _ in readers:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"{label}: a reader exited before its streams were open")
        ready = json.loads(line)
        seconds = max(seconds, ready["seconds"])
        log(f"{label}: reader {process.pid} holds {ready['ready']}/{ready['of']} streams "
            f"(opened in {ready['seconds']} s, statuses {ready['statuses']})")
    return readers, seconds


def tell(readers: list, command: str) -> None:
    for process, _ in readers:
        process.stdin.write(command + "\n")
        process.stdin.flush()


def collect(readers: list, producer_out: dict, commits_path: Path, size: int, cutoff: float = 0.0) -> dict:
    """`cutoff` (a wall time, the storm's signal less a second): latency also over the events
    committed before it, the steady state before the restart."""
    tell(readers, "stop")
    commits = {int(k): v for k, v in json.loads(commits_path.read_text()).items()}
    streams, latencies, reader_cpu, reader_wall = [], array("d"), 0.0, 0.0
    steady = array("d")
    first, last = array("d", bytes(8 * size)), array("d", bytes(8 * size))
    for process, out in readers:
        process.wait(timeout=300)
        mine, cpu, wall = summarize(str(out), size, commits, latencies, first, last, steady, cutoff)
        streams += mine
        reader_cpu += cpu
        reader_wall = max(reader_wall, wall)
    def pct(p: float, ordered: list) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1) if ordered else float("nan")

    ordered = sorted(latencies)
    # Where the time goes, per event: commit → its first stream (carrier: Redis or the outbox
    # follower, plus one write), then first → last stream (the fan-out to every stream).
    to_first = sorted(first[seq] - t for seq, t in commits.items() if first[seq])
    spread = sorted(last[seq] - first[seq] for seq in commits if first[seq])

    connected = [s for s in streams if s["status"] == 200]
    missed_per_stream = [s["expected"] - s["delivered"] for s in connected]
    return {
        "streams_open": len(connected),
        "streams_failed": len(streams) - len(connected),
        "closed_early": sum(1 for s in connected if s["closed_early"]),
        "events": producer_out.get("events"),
        "producer_seconds": producer_out.get("seconds"),
        "expected": sum(s["expected"] for s in connected),
        "delivered": sum(s["delivered"] for s in connected),
        "missed": sum(missed_per_stream),
        "streams_missing": sum(1 for m in missed_per_stream if m),
        "duplicates": sum(s["duplicates"] for s in connected),
        "unknown": sum(s["unknown"] for s in connected),
        "p50_ms": pct(0.50, ordered),
        "p99_ms": pct(0.99, ordered),
        "first_stream_p50_ms": pct(0.50, to_first),
        "first_stream_p99_ms": pct(0.99, to_first),
        "spread_p50_ms": pct(0.50, spread),
        "spread_p99_ms": pct(0.99, spread),
        "max_ms": round(1000 * ordered[-1], 1) if ordered else float("nan"),
        "reader_cpu_pct": round(100 * reader_cpu / reader_wall, 1) if reader_wall else None,
        "stream_rows": streams,
        **({"before_storm_p50_ms": pct(0.50, sorted(steady)), "before_storm_p99_ms": pct(0.99, sorted(steady)),
            "before_storm_deliveries": len(steady)} if cutoff else {}),
    }


def load(args: argparse.Namespace, label: str, readers: list, producer: subprocess.Popen, meter: Meter,
         commits_path: Path, stats_url: str | None = None, storm=None) -> dict:
    """`storm`: a callable run `--storm-at` into the load (the server restart and the readers'
    reconnect, bench_connect); it returns its figures and the meter of the new processes."""
    import httpx

    tell(readers, "mark")
    meter.start()
    producer.stdin.write("go\n")
    producer.stdin.flush()
    storm_result = None
    if storm is not None:
        time.sleep(args.duration * args.storm_at)
        storm_result, meter = storm(meter)
    profilers = []
    if args.profile and label.startswith("connect"):
        time.sleep(min(10, args.duration / 4) if storm is None else 1)
        for pid in meter.pids:
            out_file = ROOT / "var" / "bench" / f"sse-profile-{label}-{pid}.txt"
            out_file.parent.mkdir(parents=True, exist_ok=True)
            profilers.append(subprocess.Popen(
                [str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(pid), "-d",
                 str(round(args.profile)), "-r", "50", "-f", "raw", "--nonblocking", "-o", str(out_file)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    line = producer.stdout.readline()
    producer.wait(timeout=120)
    if not line:
        raise RuntimeError(f"{label}: the producer failed")
    out = json.loads(line)
    time.sleep(args.grace)  # let the last events arrive
    for profiler in profilers:
        profiler.wait(timeout=120)
    server = meter.stop()
    queued = None
    if stats_url:
        queued = [httpx_get_json(stats_url) for _ in range(4)]
    cutoff = storm_result["killed_wall"] - 1 if storm_result else 0.0
    result = collect(readers, out, commits_path, int(args.rate * args.duration), cutoff)
    result.update({"target": label, "server": server, "hub_stats": queued, "publish_failures": out.get("failures")})
    if storm_result is not None:
        result["storm"] = storm_result
    log(f"{label}: {result['delivered']}/{result['expected']} delivered, missed {result['missed']}, "
        f"p50 {result['p50_ms']} ms p99 {result['p99_ms']} ms, server CPU {server['cpu_pct']}% "
        f"RSS peak {server['rss_peak_mb']} MB, readers CPU {result['reader_cpu_pct']}%")
    return result


def bench_connect(name: str, args: argparse.Namespace, tmp: Path, root: Path = ROOT, label: str = "connect") -> dict:
    """`root`: the checkout the server runs from (another commit's worktree for --baseline); the
    producer and the database setup always run from this one."""
    env, workers = setup_env(name, args, tmp)
    if name == "production":
        subprocess.run(["redis-cli", "-n", str(args.redis_db), "flushdb"], capture_output=True)
    slug, key = prepare(env)
    port = free_port()
    label = f"{label}-{name}"
    server_log = open(tmp / f"{label}-server.log", "w")
    # The test settings: their application also answers the stream stats (tests/events/stats.py).
    server_env = {**env, "PYTHONPATH": str(root), "DJANGO_SETTINGS_MODULE": "tests.settings",
                  **(args.head_env if root == ROOT else {})}
    # Bytecode as a deployment has it: with PYTHONDONTWRITEBYTECODE set (as in this machine's
    # shells) every server process compiled the project's 140 modules, 0.2 s of each start.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "connect", "apps"], cwd=root, check=True)
    stats_url = f"http://127.0.0.1:{port}/api/v1/events/_stats"

    def start_server() -> tuple[subprocess.Popen, list[int]]:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", str(workers)],
            cwd=root, env=server_env, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_http(stats_url, process, "connect")
        except RuntimeError as error:  # the run's directory goes with the run: say why here
            server_log.flush()
            raise RuntimeError(f"{error}; its log ends:\n{Path(server_log.name).read_text()[-3000:]}") from None
        deadline = time.monotonic() + 60
        while True:  # every daphne process up, not just the first to answer
            daphnes = [pid for pid in children_of(process.pid) if "daphne" in cmdline(pid)]
            if len(daphnes) == workers or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(daphnes) == workers, (daphnes, workers)
        return process, daphnes

    servers: list[subprocess.Popen] = []
    producer = readers = None
    try:
        server, daphnes = start_server()
        servers.append(server)
        time.sleep(1)
        meter = Meter(daphnes)
        meter.idle()
        producer = subprocess.Popen(
            [sys.executable, __file__, "_produce", "--slug", slug, "--sessions", str(args.sessions),
             "--threads", str(args.producer_threads), "--rate",
             str(args.rate), "--duration", str(args.duration), "--out", str(tmp / f"{label}-commits.json")],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        sessions = json.loads(producer.stdout.readline())["sessions"]
        filters = json.dumps([{"type": "transcript.segment.created", "sessionId": s} for s in sessions])
        path = f"{STREAM}?filters={quote(filters)}"
        readers, open_seconds = start_readers(args, port, path, key, tmp, label)
        time.sleep(1)
        memory = per_stream_memory(meter, args.streams, "open")
        stats = [httpx_get_json(stats_url) for _ in range(4)]
        log(f"{label}: hub stats {stats}; {memory}")

        def storm(old_meter: Meter) -> tuple[dict, Meter]:
            """Restart `serve` under load (SIGTERM, or SIGKILL of every process of it), then every
            reader reconnects at once with its Last-Event-ID."""
            killed_at, killed_wall = time.monotonic(), time.time()
            before = old_meter.stop()
            old = servers[-1]
            if args.storm == "kill":
                for pid in [old.pid, *descendants(old.pid)]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                old.wait()
                for pid in current["pids"]:
                    while Path(f"/proc/{pid}").exists() and "daphne" in cmdline(pid):
                        time.sleep(0.05)
            else:
                old.terminate()
                old.wait(timeout=60)
            down = time.monotonic() - killed_at
            server, pids = start_server()
            servers.append(server)
            up = time.monotonic() - killed_at
            new_meter = Meter(pids)
            new_meter.idle()
            new_meter.start()
            tell(readers, "reconnect")
            lines = [json.loads(process.stdout.readline()) for process, _ in readers]
            all_back = max(line["seconds"] for line in lines)
            log(f"{label}: storm ({args.storm}): down in {down:.2f} s, accepting after {up:.2f} s, "
                f"{sum(l['reconnected'] for l in lines)}/{sum(l['of'] for l in lines)} streaming again "
                f"{all_back:.2f} s after the reconnect")
            time.sleep(1)
            figures = {
                "mode": args.storm, "at_s": round(args.duration * args.storm_at, 1), "killed_wall": killed_wall,
                "stopped_s": round(down, 2),
                "accepting_s": round(up, 2), "reconnected": sum(l["reconnected"] for l in lines),
                "of": sum(l["of"] for l in lines), "all_streaming_s": all_back,
                "all_streaming_from_kill_s": round(up + all_back, 2),
                "reconnect_started": min(l["started"] for l in lines),
                "server_before": before, "memory": per_stream_memory(new_meter, args.streams, "reconnected"),
                "hub_stats": [httpx_get_json(stats_url) for _ in range(4)],
            }
            current["pids"] = pids
            return figures, new_meter

        current = {"pids": daphnes}
        result = load(args, label, readers, producer, meter, tmp / f"{label}-commits.json", stats_url,
                      storm=storm if args.storm else None)
        result.update({"workers": workers, "memory": memory, "open_seconds": open_seconds, "hub_stats_open": stats})
        if args.storm:
            result["storm"].update(storm_streams(result.pop("stream_rows"), result["storm"]["reconnect_started"]))
        return result
    finally:
        for process in [producer] + [r[0] for r in readers or []]:
            if process is not None:
                stop(process)
        for server in servers:
            stop(server)
        server_log.close()


def per_stream_memory(meter: Meter, streams: int, when: str) -> dict:
    """RSS of the server processes now against before any stream opened, per stream."""
    now = meter.rss_mb()
    return {"when": when, "rss_idle_mb": meter.idle_rss_mb, "rss_mb": now,
            "kb_per_stream": round((now - meter.idle_rss_mb) * 1024 / max(streams, 1), 1)}


def storm_streams(streams: list[dict], started: float) -> dict:
    """Per stream: how long after the reconnect it had its 200 again, and what was missed or repeated."""
    back = sorted(s["reconnected_at"] - started for s in streams if s["reconnect_status"] == 200)
    refused = [s["reconnect_status"] for s in streams if s["status"] == 200 and s["reconnect_status"] != 200]

    def pct(p: float) -> float:
        return round(back[min(len(back) - 1, int(p * len(back)))], 3) if back else float("nan")

    return {"reconnect_p50_s": pct(0.5), "reconnect_p99_s": pct(0.99), "reconnect_max_s": pct(1.0),
            "reconnect_refused": len(refused), "reconnect_statuses": sorted(set(refused)),
            "streams_missing": sum(1 for s in streams if s["status"] == 200 and s["expected"] != s["delivered"]),
            "streams_duplicated": sum(1 for s in streams if s["status"] == 200 and s["duplicates"])}


@contextlib.contextmanager
def baseline_worktree(ref: str, tmp: Path):
    path = tmp / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(path), ref], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


def httpx_get_json(url: str) -> dict:
    """The hub's stats; a server still busy (right after a storm, 5,000 replays) may answer late:
    a figure lost is reported, never a run."""
    import httpx

    try:
        return httpx.get(url, timeout=30).json()
    except httpx.HTTPError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


NGINX_CONF = """
load_module {module};
worker_processes {workers};
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
worker_rlimit_nofile 16384;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location = /pub {{ nchan_publisher; nchan_channel_id bench; nchan_message_buffer_length 100; }}
        location = /sub {{ nchan_subscriber eventsource; nchan_channel_id bench;
                           nchan_subscriber_first_message newest; }}
    }}
}}
"""


def bench_nchan(name: str, workers: int, args: argparse.Namespace, tmp: Path) -> dict:
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()) or not Path(NCHAN_MODULE).exists():
        raise RuntimeError("nchan is not installed: apt-get install -y nginx libnginx-mod-nchan")
    prefix = Path(tempfile.mkdtemp(prefix=f"nginx-{name}-", dir=tmp))  # one per run: `--repeat` runs nchan again
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(NGINX_CONF.format(module=NCHAN_MODULE, workers=workers, prefix=prefix, port=port))
    label = f"nchan-{name}"
    nginx = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(conf), "-p", str(prefix)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    publisher = readers = None
    try:
        wait_http(f"http://127.0.0.1:{port}/nothing", nginx, "nginx")
        time.sleep(0.5)
        meter = Meter([nginx.pid] + children_of(nginx.pid))
        meter.idle()
        publisher = subprocess.Popen(
            [sys.executable, __file__, "_publish", "--port", str(port), "--threads", str(args.producer_threads),
             "--rate", str(args.rate), "--duration",
             str(args.duration), "--out", str(tmp / f"{label}-commits.json")],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        readers, open_seconds = start_readers(args, port, "/sub", "", tmp, label)
        time.sleep(1)
        memory = per_stream_memory(meter, args.streams, "open")
        result = load(args, label, readers, publisher, meter, tmp / f"{label}-commits.json")
        result.pop("stream_rows", None)
        result.update({"workers": workers, "memory": memory, "open_seconds": open_seconds})
        return result
    finally:
        for process in [publisher] + [r[0] for r in readers or []]:
            if process is not None:
                stop(process)
        stop(nginx)


# Peak resident memory of the server side holding the streams (docs/decisions/import-deferral.md).
RSS_TARGET_MB = 320


def verdict(row: dict) -> str:
    misses = row["missed"] == 0 and row["streams_failed"] == 0
    p99 = row["p99_ms"] <= 250
    rss = row["server"]["rss_peak_mb"] <= RSS_TARGET_MB
    return ", ".join([f"missed 0: {'yes' if misses else 'NO'}", f"p99 ≤ 250 ms: {'yes' if p99 else 'NO'}",
                      f"RSS ≤ {RSS_TARGET_MB} MB: {'yes' if rss else 'NO'}"])


def markdown(results: list[dict], meta: dict) -> str:
    lines = [
        f"Run {meta['started']} UTC; {meta['streams']} streams, {meta['rate']} events/s for {meta['duration']} s, "
        f"{meta['readers']} reader processes ({meta['reader']}); load average before {meta['loadavg_before']}, "
        f"after {meta['loadavg_after']}.",
        "",
        "| setup | target | processes | streams open | delivered / expected | missed | dup | p50 ms | p99 ms | "
        "max ms | commit → first stream p50 / p99 ms | first → last stream p50 / p99 ms | server CPU % | "
        "server run-queue wait % | server peak RSS MB (idle) | KB per open stream | time to open all s | readers CPU % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r["server"]
        lines.append(
            f"| {r['setup']} | {r['target'].rsplit('-', 1)[0]} | {r['workers']} | {r['streams_open']} | "
            f"{r['delivered']} / {r['expected']} | {r['missed']} | {r['duplicates']} | {r['p50_ms']} | "
            f"{r['p99_ms']} | {r['max_ms']} | {r['first_stream_p50_ms']} / {r['first_stream_p99_ms']} | "
            f"{r['spread_p50_ms']} / {r['spread_p99_ms']} | {s['cpu_pct']} | {s['runqueue_wait_pct']} | "
            f"{s['rss_peak_mb']} = {' + '.join(str(x) for x in s['rss_peak_mb_per_process'])} ({s['rss_idle_mb']}) | "
            f"{r.get('memory', {}).get('kb_per_stream')} | {r.get('open_seconds')} | {r['reader_cpu_pct']} |")
    lines.append("")
    for r in results:
        st = r.get("storm")
        if st:
            lines.append(
                f"- storm ({r['setup']}, {st['mode']} at {st['at_s']} s): old processes gone in {st['stopped_s']} s, "
                f"new ones accepting {st['accepting_s']} s after the signal; {st['reconnected']}/{st['of']} streaming "
                f"again {st['all_streaming_s']} s after the reconnect (p50 {st['reconnect_p50_s']} s, p99 "
                f"{st['reconnect_p99_s']} s; refused {st['reconnect_refused']} {st['reconnect_statuses']}); "
                f"streams missing events {st['streams_missing']}, with duplicates {st['streams_duplicated']}; "
                f"{st['memory']['kb_per_stream']} KB per reconnected stream; peak RSS of the new processes "
                f"{r['server']['rss_peak_mb']} MB, of the old ones {st['server_before']['rss_peak_mb']} MB; "
                f"latency before the restart p50 {r.get('before_storm_p50_ms')} / p99 {r.get('before_storm_p99_ms')} ms "
                f"over {r.get('before_storm_deliveries')} deliveries.")
    lines.append("")
    for setup in dict.fromkeys(r["setup"] for r in results):
        ours = next((r for r in results if r["setup"] == setup and r["target"].startswith("connect")), None)
        ref = next((r for r in results if r["setup"] == setup and r["target"].startswith("nchan")), None)
        if ours:
            lines.append(f"- {setup}: {verdict(ours)}.")
        if ours and ref:
            lines.append(f"  Ratio to nchan: p99 {ours['p99_ms'] / ref['p99_ms']:.1f}×, "
                         f"CPU {ours['server']['cpu_pct'] / max(ref['server']['cpu_pct'], 0.1):.1f}×.")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        sub = argparse.ArgumentParser()
        sub.add_argument("mode")
        for option in ("--port", "--count", "--max-seq", "--sessions", "--ramp", "--threads"):
            sub.add_argument(option, type=int)
        for option in ("--rate", "--duration"):
            sub.add_argument(option, type=float)
        for option in ("--path", "--key", "--out", "--commits", "--slug"):
            sub.add_argument(option)
        internal = sub.parse_args()
        return {"_read": run_reader, "_produce": run_producer, "_publish": run_publisher}[internal.mode](internal)

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setups", nargs="+", choices=["embedded", "production"], default=["embedded", "production"])
    parser.add_argument("--targets", nargs="+", choices=["connect", "nchan"], default=["connect", "nchan"])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50, help="events per second")
    parser.add_argument("--duration", type=float, default=60, help="seconds of load")
    parser.add_argument("--sessions", type=int, default=6, help="sessions the producer appends to (round robin)")
    parser.add_argument("--producer-threads", type=int, default=2, help="producer lanes committing side by side")
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument("--reader", choices=["c", "python"], default="c",
                        help="bench/sse_reader.c (epoll, built with cc) or the asyncio reader")
    parser.add_argument("--ramp", type=int, default=50, help="connects in flight per reader while opening")
    parser.add_argument("--grace", type=float, default=5, help="seconds to wait for the last events")
    parser.add_argument("--profile", type=float, default=0, metavar="SECONDS",
                        help="py-spy record each daphne process for SECONDS during the load (var/bench/sse-profile-*)")
    parser.add_argument("--postgres-db", default="connect_ssebench")
    parser.add_argument("--postgres-port", type=int, default=5432,
                        help="a cluster of the bench's own: streams follow the log below the cluster-wide horizon, "
                             "which another database's long transaction (a bulk seed) holds back")
    parser.add_argument("--redis-db", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="200 streams, 10 s (a smoke run)")
    parser.add_argument("--baseline", metavar="REF",
                        help="also run Connect at this git commit (a worktree), alternating with this checkout")
    parser.add_argument("--repeat", type=int, default=1, help="run every target this many times, in turn")
    parser.add_argument("--storm", choices=["term", "kill"],
                        help="Connect: restart serve under load (SIGTERM, or SIGKILL of all its processes) and "
                             "reconnect every reader at once with its Last-Event-ID (C reader only)")
    parser.add_argument("--storm-at", type=float, default=0.4, help="when, as a fraction of --duration")
    parser.add_argument("--workers", type=int, help="daphne processes in production (default 2)")
    parser.add_argument("--head-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable for this checkout's server only (repeatable; not --baseline's, not nchan's), "
                             "e.g. CONNECT_LOG_FORMAT=json LOG_LEVEL=INFO CONNECT_METRICS_TOKEN=x")
    args = parser.parse_args()
    args.head_env = dict(pair.split("=", 1) for pair in args.head_env)
    if args.quick:
        args.streams, args.duration = 200, 10
    if args.storm and args.reader != "c":
        parser.error("--storm needs the C reader")
    raise_nofile()
    meta = {"started": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"), "streams": args.streams,
            "rate": args.rate, "duration": args.duration, "readers": args.readers,
            "loadavg_before": [round(x, 2) for x in os.getloadavg()], "head_env": sorted(args.head_env)}
    results = []
    targets = list(args.targets) + (["baseline"] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="bench-sse-") as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        baseline_root = stack.enter_context(baseline_worktree(args.baseline, tmp)) if args.baseline else None
        args.c_reader = build_c_reader(tmp) if args.reader == "c" else None
        meta["reader"] = "c (bench/sse_reader.c)" if args.c_reader else "python asyncio"
        for setup in args.setups:
            workers = 1 if setup == "embedded" else (args.workers or 2)
            for repeat in range(args.repeat):
                for target in targets if repeat % 2 == 0 else targets[::-1]:
                    log(f"{setup}: {target}, {args.streams} streams, {args.rate}/s for {args.duration} s")
                    if target == "connect":
                        row = bench_connect(setup, args, tmp)
                    elif target == "baseline":
                        row = bench_connect(setup, args, tmp, root=baseline_root, label=f"baseline-{args.baseline}")
                    else:
                        row = bench_nchan(setup, workers, args, tmp)
                    row.pop("stream_rows", None)
                    row["setup"] = setup
                    results.append(row)
        if os.environ.get("BENCH_SSE_KEEP"):
            shutil.copytree(tmp, ROOT / "var" / "bench" / f"sse-{int(time.time())}")
    meta["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    out_dir = ROOT / "var" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"sse-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(markdown(results, meta))
    log(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
