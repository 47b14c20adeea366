"""A mechanism against the stock way, side by side on one database: two `serve --workers 2` of
this checkout, the second with a bench switch (bench/settings.py), loaded with wrk in turn,
the first one swapped every round; each figure is the median of the rounds.

    python bench/mechanisms.py lanes       # LaneASGIHandler vs Django's ASGIHandler, SQLite
    python bench/mechanisms.py prepared    # prepared vs unprepared (key lookup, search), PostgreSQL

Data: `seed_demo --sessions 120 --segments 500` in bench/data/ab.sqlite3 or PostgreSQL
`connect_mech_ab`. Results: docs/decisions/mechanisms.md says what each A/B decided.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ab import endpoints, make_database  # noqa: E402
from bench.harness import (  # noqa: E402
    RESULTS, Endpoint, Server, connect_server, cpu_seconds, log, manage, probe, wrk,
)

# name: (database, stock-way switch, endpoint name substrings)
MECHANISMS = {
    "lanes": ("sqlite", {"BENCH_STOCK_HANDLER": "1"}, ["list", "session get"]),
    "prepared": ("postgres", {"BENCH_UNPREPARED": "1"}, ["session get", "search"]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mechanism", choices=sorted(MECHANISMS))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    kind, switch, only = MECHANISMS[args.mechanism]
    db = make_database(kind, "connect_mech_ab")
    manage(db, "migrate", "--no-input", "-v", "0")
    info = probe(db, "--issue-key", *(["--checkpoint"] if kind == "sqlite" else []))
    Server.log_dir = RESULTS / f"mechanisms-{args.mechanism}"  # server logs (ignored by git)
    Server.log_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, list[dict]]] = {}
    with contextlib.ExitStack() as stack:
        servers = {
            "mechanism": stack.enter_context(connect_server(db, 2)),
            "stock": stack.enter_context(connect_server(db, 2, env=switch)),
        }
        auth = {"Authorization": f"Bearer {info['api_key']}"}
        words = info["search_words"] or ["meeting"]
        queries = [*words[:4], f"{words[0]} {words[-1]}"]
        search = Endpoint("search", "rest", ["/api/v1/transcripts/search?" + urlencode({"query": q}) for q in queries], auth)
        eps = [e for e in [*endpoints(info, info["api_key"]), search] if any(o in e.name for o in only)]
        for ep in eps:  # warm both
            for server in servers.values():
                wrk(server.base, ep, 1, args.connections, 2)
        for round_ in range(args.rounds):
            for ep in eps:
                for name in list(servers) if round_ % 2 == 0 else list(servers)[::-1]:
                    before = cpu_seconds(servers[name].proc.pid)
                    run = wrk(servers[name].base, ep, args.duration, args.connections, 2)
                    run["cpu_ms"] = (cpu_seconds(servers[name].proc.pid) - before) * 1000 / max(1, run["requests"])
                    run.pop("wrk_output", None)
                    results.setdefault(ep.name, {}).setdefault(name, []).append(run)
                    log(f"round {round_ + 1} {ep.name} @ {name}: {run['rps']:.0f} req/s, p99 {run['p99_ms']:.1f} ms, "
                        f"cpu {run['cpu_ms']:.2f} ms/req, non-2xx {run['non_2xx']}")
    lines = [f"{args.mechanism} ({kind}, {args.rounds} rounds x {args.duration:g} s, {args.connections} connections)",
             "| endpoint | mechanism req/s | stock req/s | ratio | CPU ms/req mechanism / stock | p99 ms mechanism / stock |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, by in results.items():
        def med(which: str, key: str) -> float:
            return statistics.median(r[key] for r in by[which])
        lines.append(f"| {name} | {med('mechanism', 'rps'):.0f} | {med('stock', 'rps'):.0f} | "
                     f"{med('mechanism', 'rps') / med('stock', 'rps'):.2f} | {med('mechanism', 'cpu_ms'):.2f} / "
                     f"{med('stock', 'cpu_ms'):.2f} | {med('mechanism', 'p99_ms'):.1f} / {med('stock', 'p99_ms'):.1f} |")
    print("\n".join(lines))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
