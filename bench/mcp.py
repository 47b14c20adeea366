"""MCP benchmark: `tools/call` of get_session and search_transcripts against Connect's /mcp
(`manage.py serve --workers 2`, daphne) and, in the same run, the official SDK's own server
(`MCPServer`, stateless HTTP, JSON responses, uvicorn with 2 processes; bench/mcp_sdk_server.py)
exposing the same two tools over the same database through Django's ORM.

    .venv/bin/python bench/mcp.py --database postgres --sessions 200
    .venv/bin/python bench/mcp.py --database sqlite --quick

Load comes from wrk (32 connections by default) posting JSON-RPC bodies that rotate through
the seeded sessions and search words. Each series is the median of `--rounds` rounds, the two
servers alternating round by round so machine noise falls on both. Then get_session's p50 at
one connection. Targets (issue 24 point 4): Connect ≥ 2× the SDK server's calls/s for
get_session, p50 ≤ 2 ms at one connection; search_transcripts within 10 % of REST search's
req/s on the same queries (`GET /api/v1/transcripts/search?query=…&limit=20`, loaded in the same
rounds against the same Connect server).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import MCP_POST_LUA, ROOT, Endpoint, drain, free_port, log  # noqa: E402
from bench.harness import wrk as harness_wrk  # noqa: E402

MODERN = "2026-07-28"
SEARCH_WORDS = ["budget", "hiring", "roadmap", "customer", "migration", "release", "pricing", "latency"]

@dataclass
class Target:
    name: str
    base: str
    process: subprocess.Popen

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def env_for(database_url: str, base_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(DATABASE_URL=database_url, CONNECT_DEVELOPMENT="1", DJANGO_SETTINGS_MODULE="connect.settings",
               CONNECT_BASE_URL=base_url, LOG_LEVEL="WARNING", PYTHONPATH=str(ROOT))
    return env


def manage(database_url: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env_for(database_url, "http://x"),
                         text=True, capture_output=True)
    if out.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def prepare(args: argparse.Namespace) -> tuple[str, str]:
    if args.database == "postgres":
        url = f"postgres://postgres@127.0.0.1:5432/{args.postgres_db}"
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-c", f"create database {args.postgres_db}"],
                       capture_output=True)
    else:
        path = ROOT / "var" / "bench-mcp.sqlite3"
        path.parent.mkdir(exist_ok=True)
        url = f"sqlite:///{path}"
    log(f"migrate and seed {args.sessions} sessions ({url})")
    manage(url, "migrate", "-v0")
    segments = ["--segments", str(args.segments)] if args.resources else []
    manage(url, "seed_demo", "--sessions", str(args.sessions), *segments)
    manage(url, "add_member", "demo", "bench-mcp@connect.test")
    key = manage(url, "issue_api_key", "demo", "--member", "bench-mcp@connect.test", "--scopes",
                 "svc:sessions:read,svc:transcripts:read,svc:boards:read", "--name", "bench-mcp")
    return url, key


def wait_ready(target: Target) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.post(target.base + "/mcp", json={}, timeout=2)
            return
        except httpx.TransportError:
            if target.process.poll() is not None:
                raise RuntimeError(f"{target.name} exited")
            time.sleep(0.3)
    raise RuntimeError(f"{target.name} did not start")


def start_connect(url: str, workers: int) -> Target:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port), "--workers", str(workers)],
                               cwd=ROOT, env=env_for(url, base), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = Target("connect", base, process)
    wait_ready(target)
    return target


def start_sdk(url: str, workers: int) -> Target:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "bench.mcp_sdk_server:app", "--port", str(port), "--workers", str(workers),
         "--log-level", "warning", "--no-access-log"],
        cwd=ROOT, env=env_for(url, base), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = Target("sdk", base, process)
    wait_ready(target)
    return target


def profile(target: Target, seconds: float, label: str) -> list[str]:
    """py-spy on each of the target's worker processes (`serve`'s daphne children) for `seconds`."""
    from bench.rest import profile_during

    pids = [int(p) for p in subprocess.run(["pgrep", "-P", str(target.process.pid)], text=True,
                                           stdout=subprocess.PIPE).stdout.split()]  # fmt: skip
    out_dir = ROOT / "var" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    return profile_during(pids, seconds, out_dir, f"mcp-{label}-{time.strftime('%Y%m%dT%H%M%S')}")


def call_body(tool: str, arguments: dict, rid: int) -> str:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments, "_meta": meta}}, separators=(",", ":"))


def headers_for(key: str, tool: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call", "Mcp-Name": tool}


def workload(connect: Target, key: str) -> dict[str, list[str]]:
    """Bodies for each tool: every seeded session id, and the search words."""
    ids, cursor = [], None
    for _ in range(50):
        arguments = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        response = httpx.post(connect.base + "/mcp", content=call_body("list_sessions", arguments, 1),
                              headers=headers_for(key, "list_sessions"), timeout=30).json()
        page = response["result"]["structuredContent"]
        ids += [item["id"] for item in page["items"]]
        cursor = page["nextCursor"]
        if not cursor:
            break
    return {
        "get_session": [call_body("get_session", {"sessionId": sid}, i) for i, sid in enumerate(ids)],
        "search_transcripts": [call_body("search_transcripts", {"query": w, "limit": 20}, i)
                               for i, w in enumerate(SEARCH_WORDS)],
    }


def sanity(target: Target, key: str, tool: str, bodies: list[str]) -> None:
    """Both servers must answer the same calls with real results, not errors."""
    for body in bodies[:3]:
        response = httpx.post(target.base + "/mcp", content=body, headers=headers_for(key, tool), timeout=30)
        result = response.json().get("result", {})
        if response.status_code != 200 or result.get("isError") is not False:
            raise RuntimeError(f"{target.name} {tool}: {response.status_code} {response.text[:300]}")


def wrk(target: Target, key: str, tool: str, bodies: list[str], duration: float, connections: int,
        threads: int) -> dict:
    if target.name == "rest":  # REST search: `bodies` are GET paths
        run = harness_wrk(target.base, Endpoint(tool, "rest", bodies, {"Authorization": f"Bearer {key}"}),
                          duration, connections, threads)
    else:
        endpoint = Endpoint(tool, "mcp", bodies, headers_for(key, tool))
        run = harness_wrk(target.base, endpoint, duration, connections, threads, lua=MCP_POST_LUA, path="/mcp")
    return {k: run[k] for k in ("rps", "p50_ms", "p99_ms", "non_2xx", "socket_errors")}


REST_SEARCH_PATHS = [f"/api/v1/transcripts/search?query={w}&limit=20" for w in SEARCH_WORDS]


def resource_body(uri: str) -> str:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                       "params": {"uri": uri, "_meta": meta}}, separators=(",", ":"))


def transcript_session(connect: Target, key: str, segments: int) -> str:
    """A seeded session whose REST transcript has `segments` segments."""
    sessions = httpx.get(connect.base + "/api/v1/sessions?limit=20", headers={"Authorization": f"Bearer {key}"},
                         timeout=30).json()["items"]
    for session in sessions:
        transcript = httpx.get(f"{connect.base}/api/v1/sessions/{session['id']}/transcript",
                               headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
        if len(transcript.get("transcript", [])) == segments:
            return session["id"]
    raise RuntimeError(f"no seeded session has {segments} segments (seed with --segments {segments})")


def resources_series(args: argparse.Namespace, connect: Target, key: str) -> dict:
    """`resources/read` of one 500-segment transcript (`connect://sessions/{id}/transcript`, the
    first page within the result budget) against REST's `GET /api/v1/sessions/{id}/transcript`,
    alternating round by round on the same server. Mcp-Name must equal the URI, so one session."""
    session_id = transcript_session(connect, key, args.segments)
    uri = f"connect://sessions/{session_id}/transcript"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
               "Mcp-Method": "resources/read", "Mcp-Name": uri}
    body = resource_body(uri)
    read = httpx.post(connect.base + "/mcp", content=body, headers=headers, timeout=30)
    contents = read.json()["result"]["contents"][0]
    rest_path = f"/api/v1/sessions/{session_id}/transcript"
    rest_size = len(httpx.get(connect.base + rest_path, headers={"Authorization": f"Bearer {key}"}).content)
    log(f"resources/read: {len(read.content)} bytes ({contents.get('_meta', {})}); REST transcript {rest_size} bytes")
    auth = {"Authorization": f"Bearer {key}"}
    endpoints = {"resources/read": Endpoint("resources/read", "mcp", [body], headers),
                 "rest transcript": Endpoint("rest transcript", "rest", [rest_path], auth)}

    def load(name: str, duration: float) -> dict:
        lua = {"lua": MCP_POST_LUA, "path": "/mcp"} if name == "resources/read" else {}
        run = harness_wrk(connect.base, endpoints[name], duration, args.connections, args.threads, **lua)
        return {k: run[k] for k in ("rps", "p50_ms", "p99_ms", "non_2xx", "socket_errors")}

    for name in endpoints:
        load(name, args.warmup)
    runs: dict[str, list[dict]] = {name: [] for name in endpoints}
    names = list(endpoints)
    for round_no in range(args.rounds):
        for name in names if round_no % 2 == 0 else names[::-1]:
            drain({}, limit_s=15)
            if args.profile and round_no == 0:
                profile(connect, args.duration, name.replace("/", "-").replace(" ", "-"))
            run = load(name, args.duration)
            runs[name].append(run)
            log(f"{name:16} round {round_no + 1}: {run['rps']:7.1f} req/s p50 {run['p50_ms']:.1f} ms "
                f"non-2xx {run['non_2xx']} socket errors {run['socket_errors']}")
    series = {name: {"rps_median": statistics.median(r["rps"] for r in rs),
                     "p50_ms_median": statistics.median(r["p50_ms"] for r in rs),
                     "p99_ms_median": statistics.median(r["p99_ms"] for r in rs),
                     "errors": sum(r["non_2xx"] + r["socket_errors"] for r in rs), "runs": rs}
              for name, rs in runs.items()}
    series["ratio_to_rest"] = series["resources/read"]["rps_median"] / series["rest transcript"]["rps_median"]
    series["bytes"] = {"resources/read": len(read.content), "rest transcript": rest_size,
                       "page": contents.get("_meta")}
    return series


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--postgres-db", default="connect_mcp")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--quick", action="store_true", help="1 round of 3 s (a smoke run)")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy Connect's daphne workers during its first round of each tool and its first "
                             "1-connection run (raw collapsed stacks in var/bench/)")
    parser.add_argument("--resources", action="store_true",
                        help="only resources/read of a transcript against REST's transcript (seeds --segments)")
    parser.add_argument("--segments", type=int, default=500, help="segments per seeded session with --resources")
    parser.add_argument("--budget", type=int, default=None,
                        help="the server's CONNECT_MCP_RESULT_BUDGET_BYTES (200000: a whole transcript per read)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.duration, args.warmup = 1, 3, 1

    url, key = prepare(args)
    if args.resources:
        return main_resources(args, url, key)
    connect = start_connect(url, args.workers)
    sdk = start_sdk(url, args.workers)
    results: dict = {"database": args.database, "sessions": args.sessions, "connections": args.connections,
                     "workers": args.workers, "rounds": args.rounds, "duration_s": args.duration,
                     "loadavg_before": os.getloadavg(), "series": {}}
    try:
        bodies = workload(connect, key)
        log(f"{len(bodies['get_session'])} sessions, {len(bodies['search_transcripts'])} search words")
        # REST search on the same Connect server, same queries, same rounds (the protocol's cost).
        rest = Target("rest", connect.base, connect.process)
        for tool, tool_bodies in bodies.items():
            targets = (connect, sdk, rest) if tool == "search_transcripts" else (connect, sdk)
            for target in targets:
                if target is not rest:
                    sanity(target, key, tool, tool_bodies)
                wrk(target, key, tool, REST_SEARCH_PATHS if target is rest else tool_bodies, args.warmup,
                    args.connections, args.threads)
            runs: dict[str, list[dict]] = {target.name: [] for target in targets}
            for round_no in range(args.rounds):
                order = targets if round_no % 2 == 0 else targets[::-1]
                for target in order:
                    drain({}, limit_s=15)
                    if args.profile and target is connect and round_no == 0:
                        results.setdefault("profiles", []).extend(profile(connect, args.duration, f"{tool}-32"))
                    run = wrk(target, key, tool, REST_SEARCH_PATHS if target is rest else tool_bodies, args.duration,
                              args.connections, args.threads)
                    runs[target.name].append(run)
                    log(f"{tool:18} {target.name:7} round {round_no + 1}: {run['rps']:7.1f} calls/s "
                        f"p50 {run['p50_ms']:.1f} ms non-2xx {run['non_2xx']} socket errors {run['socket_errors']}")
            series = {}
            for name, name_runs in runs.items():
                series[name] = {
                    "rps_median": statistics.median(r["rps"] for r in name_runs),
                    "p50_ms_median": statistics.median(r["p50_ms"] for r in name_runs),
                    "p99_ms_median": statistics.median(r["p99_ms"] for r in name_runs),
                    "errors": sum(r["non_2xx"] + r["socket_errors"] for r in name_runs),
                    "runs": name_runs,
                }
            series["ratio"] = series["connect"]["rps_median"] / series["sdk"]["rps_median"]
            if "rest" in series:
                series["ratio_to_rest"] = series["connect"]["rps_median"] / series["rest"]["rps_median"]
            results["series"][tool] = series
        drain({}, limit_s=15)
        if args.profile:
            results.setdefault("profiles", []).extend(profile(connect, args.duration, "get_session-1"))
        one = [wrk(connect, key, "get_session", bodies["get_session"], args.duration, 1, 1) for _ in range(args.rounds)]
        results["get_session_1_connection_p50_ms"] = statistics.median(r["p50_ms"] for r in one)
        one_sdk = [wrk(sdk, key, "get_session", bodies["get_session"], args.duration, 1, 1)
                   for _ in range(args.rounds)]
        results["sdk_get_session_1_connection_p50_ms"] = statistics.median(r["p50_ms"] for r in one_sdk)
    finally:
        connect.stop()
        sdk.stop()
    results["loadavg_after"] = os.getloadavg()

    out_dir = ROOT / "var" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"mcp-{args.database}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2))
    print()
    print(f"| tool ({args.database}, {args.connections} connections) | Connect calls/s | SDK server calls/s | ratio "
          "| Connect p50 | SDK p50 |")
    print("|---|---|---|---|---|---|")
    for tool, series in results["series"].items():
        c, s = series["connect"], series["sdk"]
        print(f"| {tool} | {c['rps_median']:.0f} | {s['rps_median']:.0f} | {series['ratio']:.2f}× "
              f"| {c['p50_ms_median']:.1f} ms | {s['p50_ms_median']:.1f} ms |")
    search = results["series"]["search_transcripts"]
    print(f"\nsearch_transcripts over MCP ÷ REST search (same queries, same server, same rounds): "
          f"{search['ratio_to_rest']:.2f} (REST {search['rest']['rps_median']:.0f} req/s, "
          f"p50 {search['rest']['p50_ms_median']:.1f} ms; target ≥ 0.90)")
    print(f"get_session p50 at 1 connection: Connect {results['get_session_1_connection_p50_ms']:.1f} ms, "
          f"SDK server {results['sdk_get_session_1_connection_p50_ms']:.1f} ms (target ≤ 2 ms)")
    print(f"load average before/after: {results['loadavg_before'][0]:.1f}/{results['loadavg_after'][0]:.1f}; "
          f"results: {out.relative_to(ROOT)}")
    return 0


def main_resources(args: argparse.Namespace, url: str, key: str) -> int:
    if args.budget:
        os.environ["CONNECT_MCP_RESULT_BUDGET_BYTES"] = str(args.budget)  # the server's environment (env_for)
    connect = start_connect(url, args.workers)
    results: dict = {"database": args.database, "sessions": args.sessions, "segments": args.segments,
                     "budget_bytes": args.budget,
                     "connections": args.connections, "workers": args.workers, "rounds": args.rounds,
                     "duration_s": args.duration, "loadavg_before": os.getloadavg()}
    try:
        results["resources"] = series = resources_series(args, connect, key)
    finally:
        connect.stop()
    results["loadavg_after"] = os.getloadavg()
    out_dir = ROOT / "var" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"mcp-resources-{args.database}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2))
    m, r = series["resources/read"], series["rest transcript"]
    print(f"\n| {args.segments}-segment transcript ({args.database}, {args.connections} connections) | req/s "
          "| p50 | p99 | bytes |")
    print("|---|---|---|---|---|")
    for name, s in (("MCP resources/read", m), ("REST transcript", r)):
        size = series["bytes"]["resources/read" if s is m else "rest transcript"]
        print(f"| {name} | {s['rps_median']:.0f} | {s['p50_ms_median']:.1f} ms | {s['p99_ms_median']:.1f} ms "
              f"| {size} |")
    print(f"\nresources/read ÷ REST transcript: {series['ratio_to_rest']:.2f} (target ≥ 0.90); "
          f"load average before/after: {results['loadavg_before'][0]:.1f}/{results['loadavg_after'][0]:.1f}; "
          f"results: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
