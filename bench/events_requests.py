"""Instructions per request of the event log's page and of the sessions list, in one process
(Django's test client: no server, no sockets), on a database `bench/events.py` seeded, for
callgrind where a shared machine's load cannot move them. The checkout measured is the one on
PYTHONPATH (this file imports nothing of it before Django is set up), so the same command
counts a baseline worktree:

    PYTHONPATH=. DATABASE_URL=postgres://…/connect_h_eventlog_bench REDIS_URL=redis://127.0.0.1:6379/9 \\
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=OUT \\
        .venv/bin/python bench/events_requests.py --endpoint events --count 100

Instrumentation starts after `--warmup` requests (`callgrind_control -i on`, run by the script
itself) and the file then holds exactly `--count` requests: per request = total / count. The
events pages read after the cursors in `--cursors` (one per line; written on the first run, so
every checkout reads the same pages).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

# Not this directory: its modules (bench/mcp.py) would shadow packages; the checkout comes from PYTHONPATH.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
os.environ.setdefault("CONNECT_DEVELOPMENT", "1")
os.environ.setdefault("LOG_LEVEL", "WARNING")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", choices=["events", "sessions20", "sessions100"], default="events")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--cursors", default="/tmp/events_requests_cursors.txt")
    parser.add_argument("--workspace", default="bench-ev-0")
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    from apps.tenancy.models import Membership

    settings.ALLOWED_HOSTS = ["*"]
    membership = Membership.objects.filter(workspace__slug=args.workspace).first()
    from tests import factories

    key = factories.api_key(membership, ["svc:sessions:read", "svc:transcripts:read"])
    cursors_file = Path(args.cursors)
    if not cursors_file.exists():
        cursors = []
        client = Client(headers={"Authorization": f"Bearer {key}"})
        after = None
        # Pages through the log's start: 300 full pages' cursors, the same for every checkout.
        while len(cursors) < 300:
            body = client.get("/api/v1/events", {"limit": 100, **({"after": after} if after else {})}).json()
            after = body["nextCursor"]
            cursors.append(after)
        cursors_file.write_text("\n".join(cursors) + "\n")
    cursors = cursors_file.read_text().split()
    client = Client(headers={"Authorization": f"Bearer {key}"})

    def request(n: int) -> None:
        if args.endpoint == "events":
            response = client.get("/api/v1/events", {"after": cursors[n % len(cursors)], "limit": 100})
        else:
            response = client.get("/api/v1/sessions", {"limit": 20 if args.endpoint == "sessions20" else 100})
        assert response.status_code == 200, response.content

    for n in range(args.warmup):
        request(n)
    under_valgrind = "valgrind" in os.environ.get("LD_PRELOAD", "") or os.environ.get("RUNNING_ON_VALGRIND")
    if under_valgrind or "--instr-on" in sys.argv:
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, stdout=subprocess.DEVNULL)
    started, cpu = time.perf_counter(), time.process_time()
    for n in range(args.count):
        request(args.warmup + n)
    if under_valgrind:
        subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True, stdout=subprocess.DEVNULL)
    print(f"{args.endpoint}: {args.count} requests, CPU {1000 * (time.process_time() - cpu) / args.count:.2f} ms "
          f"per request, wall {1000 * (time.perf_counter() - started) / args.count:.2f} ms", flush=True)


if __name__ == "__main__":
    main()
