"""Resident memory of each `serve` server process, checkouts side by side: idle after start, then
after a short REST load (sessions list, session get, transcript, search), A and B alternating in
one run on one seeded SQLite database.

    .venv/bin/python bench/serve_rss.py --checkout A=/path/to/a --checkout B=. [--rounds 3]

Each round starts `manage.py serve --workers 2 --no-tasks` from each checkout in turn (bench/harness.py
`connect_server`, production settings), waits until it answers and both daphne processes run,
lets it settle, reads VmRSS of the two, sends the load, lets it settle again and reads them
again. Prints one line per server and the medians per checkout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import ROOT, Database, connect_server, manage, new_run  # noqa: E402

WORKSPACE = "rss"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise LookupError(pid)


def daphnes(pids: list[int]) -> list[int]:
    return sorted(p for p in pids if b"daphne" in Path(f"/proc/{p}/cmdline").read_bytes())


def load(base: str, key: str, session_ids: list[str], requests: int) -> None:
    paths = ["/api/v1/sessions?limit=25", "/api/v1/transcripts/search?query=roadmap"]
    for session_id in session_ids[:5]:
        paths += [f"/api/v1/sessions/{session_id}", f"/api/v1/sessions/{session_id}/transcript"]

    def run(worker: int) -> None:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            for i in range(worker, requests, 4):
                client.get(paths[i % len(paths)]).raise_for_status()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(run, range(4)))


def measure(name: str, checkout: Path, db: Database, key: str, session_ids: list[str], requests: int,
            settle: float) -> list[tuple[str, float, float]]:  # fmt: skip
    server = connect_server(db, 2, root=None if checkout == ROOT else checkout, serve_args=("--no-tasks",),
                            name=f"rss-{name}")  # fmt: skip
    with server:
        deadline = time.monotonic() + 180
        while len(daphnes(server.child_pids())) != 2:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: serve did not start its two workers")
            time.sleep(0.5)
        time.sleep(settle)
        pids = daphnes(server.child_pids())
        idle = [rss_mb(p) for p in pids]
        load(server.base, key, session_ids, requests)
        time.sleep(settle)
        loaded = [rss_mb(p) for p in pids]
        return [(name, a, b) for a, b in zip(idle, loaded)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", action="append", required=True, help="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000, help="REST requests per server")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before each reading")
    args = parser.parse_args()
    checkouts = [(n, Path(p).resolve()) for n, p in (c.split("=", 1) for c in args.checkout)]
    new_run("serve-rss")  # the servers' logs go there

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rss.sqlite3"
        db = Database("sqlite", f"sqlite:///{path}", sqlite_path=path, label="sqlite", settings="connect.settings",
                      extra_env={"REDIS_URL": "", "CONNECT_QUEUE_TIMEOUT_SECONDS": "60", "PYTHONUNBUFFERED": "1"})
        first = checkouts[0][1]
        manage(db, "migrate", "-v", "0", root=first)
        manage(db, "seed_demo", "--workspace", WORKSPACE, capture=True, root=first)
        key = manage(db, "issue_api_key", WORKSPACE, "--member", "demo@example.com",
                     "--scopes", "svc:sessions:read,svc:transcripts:read", capture=True, root=first
                     ).strip().splitlines()[-1]  # fmt: skip
        session_ids = manage(db, "shell", "-v", "0", "-c",
                             "from apps.recordings.models import Session; "
                             f"print(' '.join(Session.objects.filter(workspace__slug='{WORKSPACE}')"
                             ".values_list('id', flat=True)[:5]))", capture=True, root=first).split()  # fmt: skip
        rows: list[tuple[str, float, float]] = []
        for round_ in range(args.rounds):
            for name, checkout in checkouts if round_ % 2 == 0 else reversed(checkouts):
                for row in measure(name, checkout, db, key, session_ids, args.requests, args.settle):
                    rows.append(row)
                    print(f"round {round_ + 1} {row[0]:>10}: idle {row[1]:6.1f} MB, after load {row[2]:6.1f} MB", flush=True)

    print("\nmedian per server process (MB)      idle   after load")
    for name, _ in checkouts:
        mine = [r for r in rows if r[0] == name]
        print(f"{name:>30}  {statistics.median(r[1] for r in mine):6.1f}   {statistics.median(r[2] for r in mine):6.1f}")


if __name__ == "__main__":
    sys.exit(main())
