"""MCP listen benchmark: `--streams` concurrent `subscriptions/listen` streams on one transcript
URI against `manage.py serve --workers 2` (PostgreSQL + Redis), while a producer process commits
one segment per transaction at `--rate` for `--duration` (bench/sse.py's producer, one session,
one lane, so the k-th notification of a stream is the k-th commit). Then, in the same run, the
same number of `GET /api/v1/events/stream` streams on that session's segments, for RSS per stream.

    .venv/bin/python bench/mcp_listen.py                          # 1,000 streams, 20 commits/s, 30 s
    .venv/bin/python bench/mcp_listen.py --streams 200 --duration 10
    .venv/bin/python bench/mcp_listen.py --rss-only               # only the RSS per stream, both kinds

Measured: every update delivered to every stream exactly once (missed and extra counted),
commit-to-notification latency p50/p99/max (the producer stamps the commit's wall time in an
`on_commit` hook; readers the wall time at which the notification's frame was read), and the
daphne processes' RSS per open stream (VmRSS after the streams opened, minus before), listen
against event streams. Readers: `--readers` processes of asyncio Protocols on raw sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import ROOT, free_port, log  # noqa: E402
from bench.sse import Meter, children_of, cmdline, prepare, raise_nofile, setup_env, stop, wait_http  # noqa: E402

UPDATED = b'"notifications/resources/updated"'
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def request(port: int, key: str, session_id: str, kind: str, i: int) -> bytes:
    if kind == "listen":
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "subscriptions/listen", "params": {
            "_meta": META, "notifications": {"resourceSubscriptions": [f"connect://sessions/{session_id}/transcript"]}}})
        return (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n"
                f"Content-Length: {len(body)}\r\n\r\n{body}").encode()
    filters = quote(json.dumps([{"type": "transcript.segment.created", "sessionId": session_id}]))
    return (f"GET /api/v1/events/stream?filters={filters} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {key}\r\n\r\n").encode()


def run_reader(args: argparse.Namespace) -> int:
    """Holds `--count` streams; prints a line once all answered 200, then on `stop` writes each
    stream's receipt times of the notifications (or, for event streams, nothing but the status)."""
    raise_nofile()
    received: list[list[float]] = [[] for _ in range(args.count)]
    statuses: list[int] = [0] * args.count
    marker = UPDATED if args.kind == "listen" else b"event: transcript.segment.created"

    class Reader(asyncio.Protocol):
        def __init__(self, i: int, ready: asyncio.Future) -> None:
            self.i, self.ready, self.buffer, self.head = i, ready, b"", True

        def connection_made(self, transport) -> None:
            transport.write(request(args.port, args.key, args.session, args.kind, self.i))

        def data_received(self, data: bytes) -> None:
            now = time.time()
            if self.head:
                self.buffer += data
                if b"\r\n\r\n" not in self.buffer:
                    return
                statuses[self.i] = int(self.buffer[9:12])
                self.head = False
                if not self.ready.done():
                    self.ready.set_result(None)
                data, self.buffer = self.buffer.split(b"\r\n\r\n", 1)[1], b""
            # The last bytes are kept: a marker cut across two reads is counted once, when whole.
            data = self.buffer + data
            count = data.count(marker)
            if count:
                received[self.i].extend([now] * count)
            self.buffer = data[-(len(marker) - 1):]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        readies = []
        for i in range(args.count):
            ready = loop.create_future()
            readies.append(ready)
            await loop.create_connection(lambda i=i, r=ready: Reader(i, r), "127.0.0.1", args.port)
            if i % args.batch == args.batch - 1:
                await asyncio.sleep(0.05)
        await asyncio.gather(*readies)
        print(json.dumps({"statuses": sorted(set(statuses))}), flush=True)
        while (await loop.run_in_executor(None, sys.stdin.readline)).strip() == "count":
            print(json.dumps({"received": sum(len(r) for r in received)}), flush=True)
        Path(args.out).write_text(json.dumps(received))
        print("written", flush=True)

    asyncio.run(main())
    return 0


def start_readers(args, port: int, key: str, session: str, kind: str, tmp: Path) -> list[tuple]:
    readers = []
    per = args.streams // args.readers
    for r in range(args.readers):
        out = tmp / f"{kind}-{r}.json"
        process = subprocess.Popen(
            [sys.executable, __file__, "_read", "--port", str(port), "--key", key, "--session", session, "--kind",
             kind, "--count", str(per), "--out", str(out), "--batch", str(getattr(args, "batch", 50))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        readers.append((process, out))
    for process, _ in readers:
        line = json.loads(process.stdout.readline())
        assert line["statuses"] == [200], line
    return readers


def received_so_far(readers: list[tuple]) -> int:
    total = 0
    for process, _ in readers:
        process.stdin.write("count\n")
        process.stdin.flush()
        total += json.loads(process.stdout.readline())["received"]
    return total


def drain(readers: list[tuple], expected: int, quiet_seconds: float = 15) -> None:
    """Until every notification is read, or none arrived for `quiet_seconds` (then what is
    missing is missing)."""
    last, since = -1, time.monotonic()
    while (got := received_so_far(readers)) < expected:
        if got != last:
            last, since = got, time.monotonic()
        elif time.monotonic() - since > quiet_seconds:
            return
        time.sleep(1)


def finish_readers(readers: list[tuple]) -> list[list[float]]:
    streams = []
    for process, out in readers:
        process.stdin.write("stop\n")
        process.stdin.flush()
        process.stdout.readline()
        streams.extend(json.loads(out.read_text()))
        stop(process)
    return streams


def start_server(args, server_env: dict, port: int, tmp: Path) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port), "--workers",
                               str(args.workers)], cwd=ROOT, env=server_env, stdout=open(tmp / "server.log", "a"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    wait_http(f"http://127.0.0.1:{port}/healthz", server, "connect")
    return server


def daphnes_of(server: subprocess.Popen, workers: int) -> list[int]:
    deadline = time.monotonic() + 60
    while len(daphnes := [p for p in children_of(server.pid) if "daphne" in cmdline(p)]) < workers:
        assert time.monotonic() < deadline, "daphne processes did not start"
        time.sleep(0.2)
    return daphnes


def warm_up(args, port: int, key: str, session: str, tmp: Path) -> None:
    """A few streams of each kind open and close first, so that neither kind's RSS figure carries
    the first use of the code both share (imports, the hub, its carrier)."""
    warm = argparse.Namespace(**{**vars(args), "streams": 2 * args.readers * 10})
    for kind in ("listen", "events"):
        finish_readers(start_readers(warm, port, key, session, kind, tmp))
    time.sleep(3)


def events_rss(args, server, server_env: dict, port: int, key: str, session: str, tmp: Path, workers: int) -> float:
    """KB per event stream on `server` (fresh, warmed up like the listen run's)."""
    event_meter = Meter(daphnes_of(server, workers))
    warm_up(args, port, key, session, tmp)
    event_meter.idle()
    event_readers = start_readers(args, port, key, session, "events", tmp)
    time.sleep(2)
    event_rss = round((event_meter.rss_mb() - event_meter.idle_rss_mb) * 1024 / args.streams, 1)
    finish_readers(event_readers)
    return event_rss


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_read":
        sub = argparse.ArgumentParser()
        sub.add_argument("mode")
        for option in ("--port", "--count"):
            sub.add_argument(option, type=int)
        sub.add_argument("--batch", type=int, default=50)  # connections opened per 50 ms
        for option in ("--key", "--session", "--kind", "--out"):
            sub.add_argument(option)
        return run_reader(sub.parse_args())
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--postgres-port", type=int, default=5432)
    parser.add_argument("--postgres-db", default="connect_bench_listen")
    parser.add_argument("--redis-db", type=int, default=5)
    parser.add_argument("--rss-only", action="store_true", help="open the streams, read RSS, no meeting")
    args = parser.parse_args()
    raise_nofile()
    tmp = Path(tempfile.mkdtemp(prefix="mcp-listen-"))
    env, workers = setup_env("production", args, tmp)
    subprocess.run(["redis-cli", "-n", str(args.redis_db), "flushdb"], capture_output=True)
    slug, key = prepare(env)
    port = free_port()
    server_env = {**env, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    server = start_server(args, server_env, port, tmp)
    producer = None
    try:
        meter = Meter(daphnes_of(server, workers))
        producer = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "sse.py"), "_produce", "--slug", slug, "--sessions", "1",
             "--threads", "1", "--rate", str(args.rate), "--duration", str(args.duration), "--out",
             str(tmp / "commits.json")], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        session = json.loads(producer.stdout.readline())["sessions"][0]
        warm_up(args, port, key, session, tmp)
        meter.idle()
        opened = time.monotonic()
        readers = start_readers(args, port, key, session, "listen", tmp)
        open_seconds = time.monotonic() - opened
        time.sleep(2)
        listen_rss = round((meter.rss_mb() - meter.idle_rss_mb) * 1024 / args.streams, 1)
        if args.rss_only:
            finish_readers(readers)
            stop(server)
            server = start_server(args, server_env, port, tmp)
            event_rss = events_rss(args, server, server_env, port, key, session, tmp, workers)
            print(json.dumps({"streams": args.streams, "workers": workers, "kb_per_listen_stream": listen_rss,
                              "kb_per_event_stream": event_rss, "cores": os.cpu_count(),
                              "loadavg": os.getloadavg()}, indent=2))
            return 0
        meter.start()
        producer.stdin.write("go\n")
        producer.stdin.flush()
        done = json.loads(producer.stdout.readline())
        drain(readers, done["events"] * args.streams)
        load = meter.stop()
        streams = finish_readers(readers)
        commits = json.loads((tmp / "commits.json").read_text())
        times = [commits[str(k)] for k in range(len(commits))]
        latencies, missed, extra = [], 0, 0
        for got in streams:
            missed += max(0, len(times) - len(got))
            extra += max(0, len(got) - len(times))
            latencies.extend(r - c for r, c in zip(got, times))
        latencies.sort()

        def pct(p: float) -> float:
            return round(1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))], 1)

        # Event streams on a fresh server (freed memory stays with a Python process, so a second
        # kind of stream measured in the same processes would look free), warmed up the same way.
        stop(server)
        server = start_server(args, server_env, port, tmp)
        event_rss = events_rss(args, server, server_env, port, key, session, tmp, workers)
        result = {
            "streams": args.streams, "workers": workers, "commits": done["events"], "rate": args.rate,
            "expected": len(times) * len(streams), "delivered": sum(len(g) for g in streams), "missed": missed,
            "extra": extra, "latency_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": pct(1.0) if latencies else None},
            "open_seconds": round(open_seconds, 1), "kb_per_listen_stream": listen_rss,
            "kb_per_event_stream": event_rss, "server": load, "cores": os.cpu_count(),
            "loadavg": os.getloadavg(),
        }
        print(json.dumps(result, indent=2))
        log(f"logs in {tmp}")
    finally:
        if producer is not None:
            stop(producer)
        stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
