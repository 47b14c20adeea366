"""RSS per stream, MCP `subscriptions/listen` against `GET /api/v1/events/stream`, as an A/B in
one run: for each variant, each kind on a fresh `serve --workers 2` (PostgreSQL + Redis,
`--no-tasks`), the kinds and the variants alternating, `--rounds` times. A variant is a name, an
optional checkout to serve from (another worktree: code against code) and environment settings
for the servers (the workers inherit them).

    .venv/bin/python bench/listen_rss.py --streams 1000 --rounds 2
    .venv/bin/python bench/listen_rss.py --variant base --variant arenas2:MALLOC_ARENA_MAX=2
    .venv/bin/python bench/listen_rss.py --variant main@/work/main --variant this --diagnose

Each measurement is bench/mcp_listen.py's `--rss-only` one: the same warm-up (a few streams of
each kind opened and closed), VmRSS of the daphne processes after `--streams` streams opened
minus before, per stream. `--diagnose` also reads, before and after, each daphne process's
/proc/<pid>/smaps (the `[heap]` mapping, where glibc's main arena grows, against the other
anonymous mappings: pymalloc's arenas, the other glibc arenas), glibc's `mallinfo2` and the
number of its arenas (`malloc_info`), and pymalloc's own counts (`sys._debugmallocstats`): a
probe installed through `sitecustomize` in the servers only, answering SIGUSR2; `--mid S` probes
once more S seconds into the opens (with `RSS_PROBE_TYPES=1` in a variant's settings: the
objects alive by type). Each result also gives the opens' wall time and the servers' CPU per
open; `--profile S` records one daphne process with py-spy for S seconds of the opens; `--batch`
sets how many connections each reader opens per 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import ROOT, log  # noqa: E402
from bench.mcp_listen import daphnes_of, finish_readers, start_readers, warm_up  # noqa: E402
from bench.sse import Meter, prepare, raise_nofile, setup_env, stop, wait_http  # noqa: E402

# The probe: on SIGUSR2, writes glibc's and pymalloc's figures to $RSS_PROBE_DIR/<pid>.json.
PROBE = r'''
import os, signal
if os.environ.get("RSS_PROBE_DIR"):
    def _probe(signum, frame):
        import ctypes, json, re, sys
        out = os.path.join(os.environ["RSS_PROBE_DIR"], f"{os.getpid()}.json")
        libc = ctypes.CDLL(None)
        class Info(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                          "fsmblks", "uordblks", "fordblks", "keepcost")]
        libc.mallinfo2.restype = Info
        info = libc.mallinfo2()
        figures = {name: getattr(info, name) for name, _ in Info._fields_}
        libc.fopen.restype = ctypes.c_void_p
        libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        xml_path = out + ".xml"
        fp = libc.fopen(xml_path.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        xml = open(xml_path).read()
        figures["glibc_arenas"] = len(re.findall(r'<heap nr=', xml))
        # Each heap's "current" system size, then the total's (the last).
        figures["glibc_system"] = [int(s) for s in re.findall(r'<system type="current" size="(\d+)"/>', xml)][-1]
        stats_path = out + ".pymalloc"
        saved = os.dup(2)
        with open(stats_path, "w") as f:
            os.dup2(f.fileno(), 2)
            try:
                sys._debugmallocstats()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
        stats = open(stats_path).read()
        for key, pattern in (("py_arenas", r"# arenas allocated current\s*=\s*([\d,]+)"),
                             ("py_allocated", r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
                             ("py_available", r"# bytes in available blocks\s*=\s*([\d,]+)"),
                             ("py_unused_pools", r"(\d+) unused pools \*"),
                             ("py_total", r"Total\s*=\s*([\d,]+)")):
            m = re.search(pattern, stats)
            figures[key] = int(m.group(1).replace(",", "")) if m else None
        # Per size class: bytes in pools, bytes free in them (where the holes are).
        for size, pools, used, avail in re.findall(r"^\s+\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", stats, re.M):
            figures[f"class{size}_free"] = int(avail) * int(size)
            figures[f"class{size}_used"] = int(used) * int(size)
        import gc
        figures["gc_counts"] = list(gc.get_count())
        figures["gc_collections"] = [g["collections"] for g in gc.get_stats()]
        figures["gc_collected"] = [g["collected"] for g in gc.get_stats()]
        if os.environ.get("RSS_PROBE_TYPES"):
            from collections import Counter
            counts = Counter()
            for generation in range(3):
                counts.update(type(o).__qualname__ for o in gc.get_objects(generation))
            figures["types"] = counts.most_common(60)
        with open(out + ".tmp", "w") as f:
            json.dump(figures, f)
        os.replace(out + ".tmp", out)
    signal.signal(signal.SIGUSR2, _probe)
'''


# The probe's figures that are counts; the others are sizes (KB once read).
COUNTS = ("ordblks", "smblks", "hblks", "glibc_arenas", "py_arenas", "py_unused_pools")


def smaps(pid: int) -> dict[str, int]:
    """KB of RSS in the `[heap]` mapping and in the other anonymous ones."""
    heap = anon = 0
    current = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            current = fields[5] if len(fields) > 5 else ""
        elif fields[0] == "Rss:":
            if current == "[heap]":
                heap += int(fields[1])
            elif current == "":
                anon += int(fields[1])
    return {"heap_kb": heap, "anon_kb": anon}


def probe(pids: list[int], probe_dir: Path) -> dict[str, float]:
    """The processes' figures summed (KB for sizes)."""
    for pid in pids:
        (probe_dir / f"{pid}.json").unlink(missing_ok=True)
        os.kill(pid, signal.SIGUSR2)
    total: dict[str, float] = {}
    for pid in pids:
        path = probe_dir / f"{pid}.json"
        deadline = time.monotonic() + 30
        while not path.exists():
            assert time.monotonic() < deadline, f"no probe answer from {pid}"
            time.sleep(0.1)
        figures = json.loads(path.read_text())
        figures.update(smaps(pid))
        for key in ("gc_counts", "gc_collections", "gc_collected", "types"):
            if key in figures:
                total.setdefault(key, []).append(figures.pop(key))
        for key, value in figures.items():
            if value is not None and not isinstance(value, list):
                total[key] = total.get(key, 0) + (value if key in COUNTS or key.endswith("_kb") else value / 1024)
    return total


def parse_variant(text: str) -> dict:
    """`name[@checkout][:K=V,K=V]`."""
    head, _, settings = text.partition(":")
    name, _, checkout = head.partition("@")
    env = dict(pair.split("=", 1) for pair in settings.split(",") if pair)
    return {"name": name, "checkout": Path(checkout) if checkout else ROOT, "env": env}


def start_server(checkout: Path, env: dict, port: int, log_path: Path) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "2",
                               "--no-tasks"], cwd=checkout, env=env, stdout=open(log_path, "a"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    wait_http(f"http://127.0.0.1:{port}/healthz", server, "connect")
    return server


def measure(args, variant: dict, kind: str, base_env: dict, key: str, session: str, tmp: Path) -> dict:
    env = {**base_env, "DJANGO_SETTINGS_MODULE": "tests.settings", **variant["env"],
           "PYTHONPATH": f"{tmp / 'probe'}:{variant['checkout']}" if args.diagnose else str(variant["checkout"])}
    if args.diagnose:
        env["RSS_PROBE_DIR"] = str(tmp / "probe")
    server = start_server(variant["checkout"], env, args.port, tmp / f"server-{variant['name']}.log")
    try:
        daphnes = daphnes_of(server, 2)
        meter = Meter(daphnes)
        warm_up(args, args.port, key, session, tmp)
        meter.idle()
        before = probe(daphnes, tmp / "probe") if args.diagnose else {}
        mid = {}
        if args.mid is not None:
            import threading

            def mid_probe() -> None:
                time.sleep(args.mid)
                mid.update(probe(daphnes, tmp / "probe"))

            prober = threading.Thread(target=mid_probe)
            prober.start()
        spy = None
        if args.profile:
            spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(daphnes[0]), "-d",
                                    str(int(args.profile)), "-r", "200", "-f", "raw", "-o",
                                    str(tmp / f"profile-{variant['name']}-{kind}.txt")],
                                   stdout=subprocess.DEVNULL, stderr=open(tmp / "py-spy.log", "a"))
            time.sleep(0.5)
        meter.start()
        opened = time.monotonic()
        readers = start_readers(args, args.port, key, session, kind, tmp)
        open_seconds = time.monotonic() - opened
        cpu = meter.stop()["cpu_s"]
        if spy is not None:
            spy.wait()
        if args.mid is not None:
            prober.join()
        time.sleep(2)
        result = {"variant": variant["name"], "kind": kind,
                  "kb_per_stream": round((meter.rss_mb() - meter.idle_rss_mb) * 1024 / args.streams, 2),
                  "open_seconds": round(open_seconds, 2), "cpu_ms_per_open": round(1000 * cpu / args.streams, 2)}
        if args.diagnose:
            after = probe(daphnes, tmp / "probe")
            result["kb_per_stream_by"] = {k: round((after[k] - before.get(k, 0)) / args.streams, 2)
                                          for k in after if k not in COUNTS and not isinstance(after[k], list)}
            result["counts"] = {k: (before.get(k), after[k]) for k in after if k in COUNTS}
            result["gc"] = {k: (before.get(k), mid.get(k), after.get(k)) for k in ("gc_counts", "gc_collections",
                                                                                   "gc_collected")}
            if mid:
                result["mid"] = {k: mid[k] for k in ("py_allocated", "py_total", "uordblks") if k in mid}
                result["mid_types"] = mid.get("types")
        finish_readers(readers)
        return result
    finally:
        stop(server)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--port", type=int, default=8201)
    parser.add_argument("--variant", action="append", type=parse_variant,
                        help="name[@checkout][:ENV=VALUE,...]; default: one variant, this checkout")
    parser.add_argument("--kinds", default="listen,events")
    parser.add_argument("--batch", type=int, default=50, help="connections each reader opens per 50 ms")
    parser.add_argument("--diagnose", action="store_true", help="smaps, mallinfo2, malloc_info, pymalloc stats")
    parser.add_argument("--mid", type=float, help="seconds into the opens: probe once then too (--diagnose)")
    parser.add_argument("--profile", type=float, help="py-spy one daphne process for this many seconds of the opens")
    parser.add_argument("--postgres-port", type=int, default=5432)
    parser.add_argument("--postgres-db", default="connect_bench_listen")
    parser.add_argument("--redis-db", type=int, default=5)
    args = parser.parse_args()
    args.workers = 2
    variants = args.variant or [parse_variant("this")]
    raise_nofile()
    tmp = Path(tempfile.mkdtemp(prefix="listen-rss-"))
    (tmp / "probe").mkdir()
    (tmp / "probe" / "sitecustomize.py").write_text(PROBE)
    env, _ = setup_env("production", args, tmp)
    subprocess.run(["redis-cli", "-n", str(args.redis_db), "flushdb"], capture_output=True)
    slug, key = prepare(env)
    # A session to watch, made by bench/sse.py's producer (which then waits for a `go` never sent).
    producer = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "sse.py"), "_produce", "--slug", slug, "--sessions", "1", "--threads",
         "1", "--rate", "1", "--duration", "1", "--out", str(tmp / "commits.json")], cwd=ROOT, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    results = []
    try:
        session = json.loads(producer.stdout.readline())["sessions"][0]
        for round_ in range(args.rounds):
            for variant in variants:
                for kind in args.kinds.split(","):
                    result = measure(args, variant, kind, env, key, session, tmp)
                    result.update(round=round_ + 1, loadavg=os.getloadavg())
                    log(json.dumps(result))
                    results.append(result)
    finally:
        stop(producer)
    summary = {}
    for variant in variants:
        for kind in args.kinds.split(","):
            summary[f"{variant['name']}/{kind}"] = [r["kb_per_stream"] for r in results
                                                    if r["variant"] == variant["name"] and r["kind"] == kind]
    print(json.dumps({"streams": args.streams, "kb_per_stream": summary, "results": results}, indent=2))
    log(f"logs and profiles in {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
