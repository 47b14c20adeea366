"""Requests through the whole ASGI application in this process (no daphne, no sockets), for
counting instructions per request with callgrind where a shared machine's load cannot move them:

    PYTHONPATH=. valgrind --tool=callgrind --callgrind-out-file=OUT python bench/asgi_requests.py --count 0
    PYTHONPATH=. valgrind --tool=callgrind --callgrind-out-file=OUT python bench/asgi_requests.py --count 200 --endpoint mcp
    (--endpoint list | get | mcp | transcript: the sessions list, session get, MCP get_session, a
    flat transcript of the seeded session with the most segments)

Per request = (instructions at --count 200 − at --count 0) / 200. Both runs first send
--warmup requests to every endpoint.

On a loaded machine, where starting Django under valgrind takes minutes, one run can measure
every endpoint: `--phases` sends --count requests to each endpoint in turn and asks callgrind
for a dump after the warm-up and after each endpoint (`callgrind_control -d`), so each dump's
total is one endpoint's --count requests:

    PYTHONPATH=. valgrind --tool=callgrind --callgrind-out-file=OUT python bench/asgi_requests.py --count 100 --phases Reads `bench/data/ab.sqlite3` (bench/ab.py seeds it) with
DJANGO_SETTINGS_MODULE=bench.settings; the checkout measured is the one on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
os.environ.setdefault("CONNECT_DEVELOPMENT", "1")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{ROOT / 'bench' / 'data' / 'ab.sqlite3'}")


ENDPOINTS = ("list", "get", "mcp", "transcript")


def requests_for(endpoint: str, key: str, session_ids: list[str], n: int) -> tuple[str, str, bytes, list, bytes]:
    auth = [(b"authorization", f"Bearer {key}".encode())]
    if endpoint == "transcript":  # fixture() puts the longest transcript's session first
        return "GET", f"/api/v1/sessions/{session_ids[0]}/transcript", b"", auth, b""
    if endpoint == "list":
        return "GET", "/api/v1/sessions", b"", auth, b"limit=100"
    if endpoint == "get":
        return "GET", f"/api/v1/sessions/{session_ids[n % len(session_ids)]}", b"", auth, b""
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": "get_session", "arguments": {"sessionId": session_ids[n % len(session_ids)]}}})
    headers = auth + [(b"content-type", b"application/json"), (b"accept", b"application/json"),
                      (b"mcp-protocol-version", b"2025-06-18"), (b"host", b"127.0.0.1")]  # fmt: skip
    return "POST", "/mcp", body.encode(), headers, b""


async def one(application, method: str, path: str, body: bytes, headers: list, query: bytes) -> int:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers], "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
    }  # fmt: skip
    sent = False
    status = 0

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()

    async def send(message):
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await application(scope, receive, send)
    return status


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--endpoint", choices=ENDPOINTS, default="list")
    parser.add_argument("--phases", action="store_true", help="every endpoint, a callgrind dump after each")
    args = parser.parse_args()
    from connect.asgi import application
    from asgiref.sync import sync_to_async

    def fixture() -> tuple[str, list[str]]:
        from apps.recordings.models import Session
        from apps.tenancy.models import Membership
        from tests import factories

        from django.db.models import Count

        from apps.recordings.models import Transcript

        membership = Membership.objects.filter(workspace__slug="bench").first()
        ids = list(Session.objects.filter(workspace=membership.workspace).values_list("id", flat=True)[:300])
        longest = (Transcript.objects.filter(workspace=membership.workspace, revision_kind="committed")
                   .annotate(n=Count("segments")).order_by("-n").values_list("session_id", flat=True).first())  # fmt: skip
        if longest in ids:
            ids.remove(longest)
        return factories.api_key(membership, factories.ALL_SCOPES), [longest, *ids]

    key, ids = await sync_to_async(fixture)()
    for endpoint in ENDPOINTS:
        for n in range(args.warmup):
            assert await one(application, *requests_for(endpoint, key, ids, n)) == 200
    if not args.phases:
        for n in range(args.count):
            assert await one(application, *requests_for(args.endpoint, key, ids, n)) == 200
        return 0
    dump("warmup")
    for endpoint in ENDPOINTS:
        for n in range(args.count):
            assert await one(application, *requests_for(endpoint, key, ids, n)) == 200
        dump(endpoint)
    return 0


def dump(label: str) -> None:
    """A callgrind dump now. callgrind reads its commands while this process runs code, so wait
    busily (a blocking wait would run none, and the dump would never come)."""
    import subprocess
    import time

    control = subprocess.Popen(["callgrind_control", "-d", label, str(os.getpid())], stdout=subprocess.DEVNULL)
    while control.poll() is None:
        time.sleep(0)  # a thread switch, and bytecode between them
    print(f"dumped {label}", flush=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
