"""Where a listen stream's memory goes, against an event stream's: Python's own allocations
(tracemalloc) in one daphne process of `serve --workers 1` (PostgreSQL + Redis), before and after
`--streams` streams of each kind open, grouped by where they were allocated. RSS says how much a
process holds; this says which objects a stream keeps (RSS also carries the allocator's slack).

    .venv/bin/python bench/mcp_listen_memory.py --streams 300 --postgres-db connect_bench_listen

The server process traces from a signal sent after the warm-up (`serve` starts in time), through
a `sitecustomize` module this script writes to a temporary directory on the server's PYTHONPATH:
SIGUSR2 starts tracemalloc, SIGUSR1 dumps a snapshot. Streams: bench/mcp_listen.py's readers.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import mcp_listen  # noqa: E402
from bench.harness import ROOT, free_port  # noqa: E402
from bench.sse import prepare, raise_nofile, setup_env, status_kb, stop  # noqa: E402

HOOK = '''import os, signal, time, tracemalloc
def _start(signum, frame):
    tracemalloc.start(int(os.environ["BENCH_TRACE_FRAMES"]))
def _dump(signum, frame):
    import gc
    gc.collect()
    tracemalloc.take_snapshot().dump(os.path.join(os.environ["BENCH_TRACE_DIR"], f"snap-{time.time_ns()}.pickle"))
if os.environ.get("BENCH_TRACE_DIR"):
    signal.signal(signal.SIGUSR2, _start)
    signal.signal(signal.SIGUSR1, _dump)
'''


def snapshot(pid: int, directory: Path) -> tracemalloc.Snapshot:
    before = set(glob.glob(str(directory / "snap-*.pickle")))
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 300
    while not (new := set(glob.glob(str(directory / "snap-*.pickle"))) - before):
        assert time.monotonic() < deadline, "no snapshot"
        time.sleep(0.5)
    time.sleep(2)  # written whole
    return tracemalloc.Snapshot.load(new.pop())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--postgres-port", type=int, default=5432)
    parser.add_argument("--postgres-db", default="connect_bench_listen")
    parser.add_argument("--redis-db", type=int, default=5)
    options = parser.parse_args()
    args = argparse.Namespace(streams=options.streams, readers=1, workers=1, postgres_port=options.postgres_port,
                              postgres_db=options.postgres_db, redis_db=options.redis_db)
    raise_nofile()
    tmp = Path(tempfile.mkdtemp(prefix="mcp-listen-memory-"))
    (tmp / "sitecustomize.py").write_text(HOOK)
    env, _ = setup_env("production", args, tmp)
    subprocess.run(["redis-cli", "-n", str(args.redis_db), "flushdb"], capture_output=True)
    slug, key = prepare(env)
    port = free_port()
    server_env = {**env, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": f"{tmp}:{ROOT}",
                  "BENCH_TRACE_DIR": str(tmp), "BENCH_TRACE_FRAMES": str(options.frames)}
    server = mcp_listen.start_server(args, server_env, port, tmp)
    producer = None
    try:
        (daphne,) = mcp_listen.daphnes_of(server, 1)
        producer = subprocess.Popen(  # only to make the session the streams watch
            [sys.executable, str(ROOT / "bench" / "sse.py"), "_produce", "--slug", slug, "--sessions", "1",
             "--threads", "1", "--rate", "1", "--duration", "1", "--out", str(tmp / "commits.json")],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        session = json.loads(producer.stdout.readline())["sessions"][0]
        mcp_listen.warm_up(args, port, key, session, tmp)
        os.kill(daphne, signal.SIGUSR2)
        time.sleep(2)
        for kind in ("listen", "events"):
            before, rss_before = snapshot(daphne, tmp), status_kb(daphne, "VmRSS")
            readers = mcp_listen.start_readers(args, port, key, session, kind, tmp)
            time.sleep(3)
            after, rss_after = snapshot(daphne, tmp), status_kb(daphne, "VmRSS")
            mcp_listen.finish_readers(readers)
            time.sleep(3)
            stats = after.compare_to(before, "traceback")
            per = options.streams
            print(f"== {kind}: Python allocations +{sum(s.size_diff for s in stats) / per:.0f} B/stream "
                  f"(RSS +{(rss_after - rss_before) / per:.1f} KB/stream, not comparable across kinds in one process)")
            for stat in stats[:options.top]:
                where = stat.traceback[-1]
                print(f"  {stat.size_diff / per:6.0f} B  {where.filename.replace(str(ROOT) + '/', '')}:{where.lineno}")
    finally:
        if producer is not None:
            stop(producer)
        stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
