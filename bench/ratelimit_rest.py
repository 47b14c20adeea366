"""The rate-limit counter file through the REST path on SQLite: `serve --workers 2` at this
checkout (pread/pwrite under the lock) against REF (the file mapped into memory), with this
checkout's limits off as the floor, side by side in one run.

    .venv/bin/python bench/ratelimit_rest.py --baseline REF [--rounds 3] [--duration 5]

Each server counts on its own copy of one seeded database (so each has its own counter file),
limits high enough never to refuse. wrk (2 threads, 16 connections) on session get (rotating
over every session: the cheapest authenticated request, where a counter's cost shows most) and
the sessions list; servers alternate within each endpoint, the first swapped every round.
Prints a markdown table of medians: req/s and the servers' CPU per request.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (  # noqa: E402
    ROOT, Database, Endpoint, Server, connect_server, cpu_seconds, log, manage, probe, wrk,
)  # fmt: skip

UNLIMITED = {"CONNECT_RATE_LIMIT_PER_CREDENTIAL": "1000000000", "CONNECT_RATE_LIMIT_PER_WORKSPACE": "1000000000",
             "CONNECT_RATE_LIMIT_WINDOW_SECONDS": "1000000000"}  # fmt: skip
LIMITS_OFF = {"CONNECT_RATE_LIMIT_PER_CREDENTIAL": "0", "CONNECT_RATE_LIMIT_PER_WORKSPACE": "0"}


def checkout(ref: str, into: Path) -> Path:
    """The tree of `ref` (git archive: no worktree is registered), with this checkout's venv."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, stdout=subprocess.PIPE).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, metavar="REF")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ratelimit-rest-"))
    Server.log_dir = work
    seeded = Database("sqlite", f"sqlite:///{work / 'seed.sqlite3'}", sqlite_path=work / "seed.sqlite3", label="seed")
    manage(seeded, "migrate", "--no-input", "-v", "0")
    manage(seeded, "seed_demo", "--workspace", "bench", "--sessions", "200", "--segments", "20", "-v", "0")
    info = probe(seeded, "--issue-key", "--checkpoint")
    auth = {"Authorization": f"Bearer {info['api_key']}"}
    endpoints = [
        Endpoint("session get", "rest", [f"/api/v1/sessions/{i}" for i in info["session_ids"]], auth),
        Endpoint("sessions list (limit=20)", "rest", ["/api/v1/sessions?limit=20"], auth),
    ]

    def copy(label: str) -> Database:
        path = work / f"{label}.sqlite3"
        shutil.copy(seeded.sqlite_path, path)
        return Database("sqlite", f"sqlite:///{path}", sqlite_path=path, label=label)

    baseline_root = checkout(args.baseline, work / "baseline")
    results: dict[str, dict[str, list[dict]]] = {}
    with contextlib.ExitStack() as stack:
        servers = {
            "pread (this checkout)": stack.enter_context(connect_server(copy("head"), 2, env=UNLIMITED)),
            f"mmap ({args.baseline})": stack.enter_context(
                connect_server(copy("baseline"), 2, root=baseline_root, env=UNLIMITED)
            ),
            "limits off (this checkout)": stack.enter_context(connect_server(copy("off"), 2, env=LIMITS_OFF)),
        }
        order = list(servers)
        for round_ in range(args.rounds):
            for endpoint in endpoints:
                for name in order if round_ % 2 == 0 else order[::-1]:
                    cpu_before = cpu_seconds(servers[name].proc.pid)
                    run = wrk(servers[name].base, endpoint, args.duration, 16, 2)
                    run["cpu_ms"] = (cpu_seconds(servers[name].proc.pid) - cpu_before) * 1000 / max(1, run["requests"])
                    if run["non_2xx"] or run["socket_errors"]:
                        raise SystemExit(f"{name}: {run['non_2xx']} non-2xx, {run['socket_errors']} socket errors")
                    results.setdefault(endpoint.name, {}).setdefault(name, []).append(run)
                    log(f"round {round_ + 1} {endpoint.name} @ {name}: {run['rps']:.0f} req/s, {run['cpu_ms']:.2f} ms CPU")
    shutil.rmtree(work, ignore_errors=True)
    names = list(servers)
    print("Medians; server CPU per request (every process of the server) is the steadier figure on a busy machine.")
    print()
    print(f"| endpoint | {' | '.join(f'{n} req/s, CPU ms/req' for n in names)} | CPU pread / mmap | CPU pread / off |")
    print("|---|" + "---:|" * (len(names) + 2))
    for endpoint in endpoints:
        runs = results[endpoint.name]
        rps = {n: statistics.median(r["rps"] for r in runs[n]) for n in names}
        cpu = {n: statistics.median(r["cpu_ms"] for r in runs[n]) for n in names}
        print(f"| {endpoint.name} | {' | '.join(f'{rps[n]:.0f}, {cpu[n]:.2f}' for n in names)} | "
              f"{cpu[names[0]] / cpu[names[1]]:.2f} | {cpu[names[0]] / cpu[names[2]]:.2f} |")

if __name__ == "__main__":
    main()
