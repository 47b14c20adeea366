"""The benchmark harness every script in bench/ shares: paths, logging, databases (the
benchmark settings, migrations, PostgreSQL databases made or made afresh, the search index's
upkeep after a seed), servers started on free ports and stopped with their process group
(Connect as `serve`, at this commit or another checkout; Datasette as the reference), wrk with
its Lua script and exact percentiles, sanity checks of a response, waiting for the machine to be
idle between runs, and for scripts that run the application in their own process (the probes,
in-process A/Bs) Django set up the same way and a read-only API key.

It imports no other module of bench/: the scripts import it, never the other way round.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.servers import descendants  # one /proc walk, shared with the tests

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
DATA = BENCH / "data"
RESULTS = BENCH / "results"
PYTHON = sys.executable
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
# How long a server may take to answer after its start: on a loaded 2-core machine daphne and
# the task cluster have taken a minute to import. The bound only matters when one never comes up.
START_SECONDS = 180

# A wrk script: rotates through PATHS (one start offset per thread), sends HEADERS, and prints
# one JSON line from done() with exact latency percentiles and the error counts.
LUA = r"""
local paths = {%(paths)s}
local headers = {%(headers)s}
local counter = 0
local threads = {}
function setup(thread)
  thread:set("offset", #threads * 7919)
  table.insert(threads, thread)
end
function init(args)
  counter = offset or 0
  for k, v in pairs(headers) do wrk.headers[k] = v end
end
function request()
  counter = counter + 1
  return wrk.format("GET", paths[(counter %% #paths) + 1])
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%%d,"duration_us":%%d,"bytes":%%d,' ..
    '"errors":{"connect":%%d,"read":%%d,"write":%%d,"status":%%d,"timeout":%%d},' ..
    '"latency_us":{"mean":%%.1f,"stdev":%%.1f,"max":%%d,"p50":%%d,"p75":%%d,"p90":%%d,"p99":%%d,"p999":%%d}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.stdev, latency.max, latency:percentile(50), latency:percentile(75),
    latency:percentile(90), latency:percentile(99), latency:percentile(99.9)))
end
"""

# The same script POSTing each of the endpoint's "paths" as a body to /mcp, in rotation.
MCP_POST_LUA = LUA.replace(
    'return wrk.format("GET", paths[(counter %% #paths) + 1])',
    'return wrk.format("POST", "/mcp", nil, paths[(counter %% #paths) + 1])',
)


def log(message: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lua_string(value: str) -> str:
    return json.dumps(value)  # a JSON string literal is a valid Lua string literal for ASCII


# --- Databases --------------------------------------------------------------------------------


@dataclass
class Database:
    kind: str  # sqlite | postgres
    url: str
    sqlite_path: Path | None = None
    probe: dict = field(default_factory=dict)
    label: str = ""  # sqlite | postgres | postgres-pool (same database, pooled connections)
    extra_env: dict[str, str] = field(default_factory=dict)
    settings: str = "bench.settings"  # connect.settings: production's, without the reference views

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.url,
            DJANGO_SETTINGS_MODULE=self.settings,
            CONNECT_DEVELOPMENT="1",
            PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
            LOG_LEVEL="WARNING",
        )
        env.update(self.extra_env)
        return env


def ensure_postgres_database(name: str, admin_url: str = PG_ADMIN_URL) -> None:
    """Create database `name` on the server `admin_url` connects to, unless it exists."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            log(f"creating PostgreSQL database {name}")
            conn.execute(f'CREATE DATABASE "{name}"')


def recreate_postgres_database(name: str, admin_url: str = PG_ADMIN_URL) -> None:
    """Drop database `name` (closing its connections) and create it empty."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        log(f"creating PostgreSQL database {name} afresh")
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def manage(db: Database, *args: str, capture: bool = False, root: Path | None = None) -> str:
    """`manage.py *args` on `db`, of this checkout or the one at `root`."""
    env = db.env()
    if root:
        env["PYTHONPATH"] = str(root) + os.pathsep + env["PYTHONPATH"]
    result = subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=root or ROOT,
        env=env,
        check=True,
        text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return result.stdout or ""


def run_probe(db: Database, module: str, *args: str) -> dict:
    """`python -m module *args` on `db`: the JSON object it prints on its last line."""
    out = subprocess.run(
        [PYTHON, "-m", module, *args],
        cwd=ROOT,
        env=db.env(),
        check=True,
        text=True,
        stdout=subprocess.PIPE,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def probe(db: Database, *extra: str) -> dict:
    """The seeded workspace `bench` as bench/probe.py describes it."""
    return run_probe(db, "bench.probe", "--workspace", "bench", *extra)


def after_seed(db: Database) -> None:
    """The search index's hourly upkeep, as the task cluster runs it in service (a database
    seeded before it existed is otherwise measured as if it never ran). PostgreSQL: VACUUM
    (visibility map, for index-only scans) as autovacuum would do in service. SQLite: fold the
    WAL into the file; no ANALYZE, as nothing in the app runs it."""
    manage(db, "shell", "-c", "from apps.recordings.services import compact_search_index; compact_search_index()")
    if db.kind == "postgres":
        import psycopg

        with psycopg.connect(db.url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    else:
        import sqlite3

        with contextlib.closing(sqlite3.connect(db.sqlite_path)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# --- Servers ----------------------------------------------------------------------------------


class Server:
    log_dir = RESULTS

    def __init__(
        self, name: str, command: list[str], env: dict[str, str], port: int, ready_path: str, cwd: Path = ROOT
    ) -> None:
        self.name, self.command, self.env, self.port, self.ready_path = name, command, env, port, ready_path
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"server-{self.name}.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        log(f"starting {self.name} on port {self.port}")
        self.log_file = open(self.log_path, "w")
        # Its own process group, so stopping it stops its children (daphne / uvicorn workers).
        self.proc = subprocess.Popen(
            self.command, cwd=self.cwd, env=self.env, stdout=self.log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}); see {self.log_path}")
            try:
                with urllib.request.urlopen(self.base + self.ready_path, timeout=5) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.3)
        self.__exit__(None, None, None)
        raise RuntimeError(f"{self.name} did not become ready; see {self.log_path}")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)  # any straggling child of this group only
        self.log_file.close()

    def child_pids(self) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], text=True, stdout=subprocess.PIPE).stdout
        return [int(p) for p in out.split()]


def connect_server(
    db: Database, workers: int, *, stock_handler: bool = False, root: Path | None = None,
    env: dict[str, str] | None = None, serve_args: tuple[str, ...] = (), name: str = "",
) -> Server:  # fmt: skip
    """Production: `serve --workers N`. With `stock_handler`, the same with Django's own
    ASGIHandler (a thread and a connection per request) instead of LaneASGIHandler. With
    `root`, the Connect checked out there (another commit, for side-by-side runs). `env`: more
    variables for this server only; `serve_args`: more options of `serve` (`--no-tasks`);
    `name`: its log's name, when several servers of one kind run in one script."""
    overrides = env or {}
    command = [PYTHON, "manage.py", "serve", "--host", "127.0.0.1", "--port", "{port}", "--workers", str(workers),
               *serve_args]
    port = free_port()
    command = [c.replace("{port}", str(port)) for c in command]
    env = {**db.env(), **({"BENCH_STOCK_HANDLER": "1"} if stock_handler else {}), **overrides}
    name = name or f"connect-{'stock-' if stock_handler else ''}{'baseline-' if root else ''}{db.label}"
    if root:
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    return Server(name, command, env, port, "/.well-known/oauth-protected-resource", cwd=root or ROOT)


def datasette_server(db: Database, workers: int) -> Server:
    port = free_port()
    metadata = Server.log_dir / "datasette-metadata.json"
    metadata.write_text(json.dumps(datasette_metadata(db), indent=2))
    env = db.env() | {"BENCH_DATASETTE_DB": str(db.sqlite_path), "BENCH_DATASETTE_METADATA": str(metadata)}
    if workers == 1:  # Datasette as shipped: one process
        command = [
            PYTHON, "-m", "datasette", "serve", "-i", str(db.sqlite_path), "--host", "127.0.0.1", "--port", str(port),
            "--metadata", str(metadata),
            "--setting", "suggest_facets", "off", "--setting", "default_page_size", "100",
            "--setting", "sql_time_limit_ms", "30000",
        ]  # fmt: skip
    else:  # the same app under uvicorn with N worker processes, for a like-for-like process count
        command = [
            PYTHON, "-m", "uvicorn", "bench.datasette_app:app", "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(workers), "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
    return Server(f"datasette-{workers}p", command, env, port, "/-/versions.json")


# --- Load -------------------------------------------------------------------------------------


@dataclass
class Endpoint:
    name: str
    server: str  # connect | datasette-1p | datasette-2p
    paths: list[str]
    headers: dict[str, str] = field(default_factory=dict)
    check: str = ""  # what a sane response holds (see sanity_check)


def get_json(url: str, headers: dict[str, str]) -> tuple[int, object]:
    """(status, parsed JSON body), or the body as text when it is not JSON (an export)."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
            if response.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            try:
                return response.status, json.loads(body)
            except ValueError:
                return response.status, body.decode(errors="replace")
    except urllib.error.HTTPError as error:
        body = error.read()
        try:
            return error.code, json.loads(body)
        except ValueError:
            return error.code, body[:300].decode(errors="replace")


def sanity_check(base: str, endpoint: Endpoint) -> str | None:
    """None when the first path answers 200 with the expected content, else a description."""
    status, body = get_json(base + endpoint.paths[0], endpoint.headers)
    kind, _, expected = endpoint.check.partition("=")
    if kind == "status":  # e.g. a conditional request: status=304
        return None if status == int(expected) else f"expected HTTP {expected}, got {status}"
    if status != 200:
        return f"HTTP {status}: {str(body)[:200]}"
    if kind == "text":  # an export: the body starts with `expected`
        return None if isinstance(body, str) and body.startswith(expected) else f"expected {expected!r}…"
    if kind == "items" and len(body.get("items", [])) != int(expected):
        return f"expected {expected} items, got {len(body.get('items', []))}"
    if kind == "transcript" and len(body.get("transcript", [])) != int(expected):
        return f"expected {expected} segments, got {len(body.get('transcript', []))}"
    if kind == "rows" and len(body.get("rows", [])) != int(expected):
        return f"expected {expected} rows, got {len(body.get('rows', []))}"
    if kind == "nonempty" and not (body.get("items") or body.get("rows")):
        return "no hits"
    return None


def wrk(url_base: str, endpoint: Endpoint, duration: float, connections: int, threads: int, *,
        lua: str = LUA, path: str | None = None) -> dict:
    """wrk with `lua` (LUA: GET each of the endpoint's paths in turn) against `url_base` +
    `path` (default: the first of its paths; a script that POSTs `paths` as bodies names its own)."""
    script = lua % {
        "paths": ", ".join(lua_string(p) for p in endpoint.paths),
        "headers": ", ".join(f"[{lua_string(k)}] = {lua_string(v)}" for k, v in endpoint.headers.items()),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        command = [
            "wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(duration))}s", "--timeout", "10s", "--latency",
            "-s", f.name, url_base + (path or endpoint.paths[0]),
        ]  # fmt: skip
        out = subprocess.run(command, text=True, stdout=subprocess.PIPE, timeout=duration + 60).stdout
    finally:
        os.unlink(f.name)
    line = next((ln for ln in out.splitlines() if ln.startswith("BENCHJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary:\n{out}")
    raw = json.loads(line.removeprefix("BENCHJSON "))
    seconds = raw["duration_us"] / 1e6
    errors = raw["errors"]
    return {
        "rps": raw["requests"] / seconds if seconds else 0.0,
        "requests": raw["requests"],
        "p50_ms": raw["latency_us"]["p50"] / 1000,
        "p90_ms": raw["latency_us"]["p90"] / 1000,
        "p99_ms": raw["latency_us"]["p99"] / 1000,
        "mean_ms": raw["latency_us"]["mean"] / 1000,
        "max_ms": raw["latency_us"]["max"] / 1000,
        "mb_per_s": raw["bytes"] / seconds / 1e6 if seconds else 0.0,
        "non_2xx": errors["status"],
        "socket_errors": errors["connect"] + errors["read"] + errors["write"] + errors["timeout"],
        "wrk_output": out,
    }


# The FTS5 table of migration 0002 is contentless and its rowid is `transcript key << 24 |
# sequence`, the key being the INTEGER PRIMARY KEY of recordings_segment_search: Datasette
# cannot tie it to recordings_segment for `?_search=`, so Datasette serves the search as a
# canned query over the same index (its JSON API for SQL): the 20 best segments by bm25 in the
# workspace (ranked first, joined to their text after the LIMIT). Comparable work to Connect's
# search, which also ranks every match (best segment per transcript) before it limits.
DATASETTE_SEARCH_SQL = """
WITH best AS (
  SELECT f.rowid AS r, f.rank AS rank
  FROM recordings_segment_fts AS f
  JOIN recordings_segment_search AS k ON k.id = (f.rowid >> 24)
  WHERE recordings_segment_fts MATCH :q AND k.workspace_id = :ws
  ORDER BY f.rank
  LIMIT 20
)
SELECT s.id, s.transcript_id, s.sequence, s.text, best.rank
FROM best
JOIN recordings_segment_search AS k ON k.id = (best.r >> 24)
JOIN recordings_segment AS s ON s.transcript_id = k.transcript_id AND s.sequence = (best.r & 16777215)
ORDER BY best.rank
"""


@contextlib.contextmanager
def baseline_worktree(ref: str, path: Path):
    """A detached git worktree of `ref` at `path` for a baseline server, removed afterwards."""
    subprocess.run(["git", "worktree", "add", "--detach", str(path), ref], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    log(f"baseline: {ref} = {subprocess.check_output(['git', 'rev-parse', '--short', ref], cwd=ROOT, text=True).strip()}")
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


def new_run(name: str) -> tuple[Path, dt.datetime]:
    """A new bench/results/<name>-<UTC time>/ (the servers of the run log there too) and the
    run's start."""
    started = dt.datetime.now(dt.timezone.utc)
    run_dir = RESULTS / f"{name}-{started:%Y%m%dT%H%M%SZ}"
    run_dir.mkdir(parents=True)
    Server.log_dir = run_dir
    return run_dir, started


def run_line(meta: dict) -> str:
    """The first words of a results table: when, where, and how busy the machine was."""
    return (f"Run {meta['started']} on {meta['machine']}; load average before/after "
            f"{meta['loadavg_before'][0]:.1f}/{meta['loadavg_after'][0]:.1f}.")


def save_results(run_dir: Path, meta: dict, results: object, table: str) -> None:
    """results.json (`meta` and `results`) and results.md (`table`) into `run_dir`; prints the table."""
    (run_dir / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2, default=str))
    (run_dir / "results.md").write_text(table)
    print()
    print(table)
    log(f"written to {run_dir.relative_to(ROOT)}/")


def datasette_metadata(db: Database) -> dict:
    queries = {}
    if any(t["name"] == "recordings_segment_fts" for t in db.probe.get("fts_tables", [])):
        queries["search_segments"] = {"sql": DATASETTE_SEARCH_SQL}
    return {"databases": {db.sqlite_path.stem: {"queries": queries}}}


def datasette_search_paths(db: Database, queries: list[str]) -> list[str]:
    if not datasette_metadata(db)["databases"][db.sqlite_path.stem]["queries"]:
        return []
    ws = db.probe["workspace"]["id"]
    # The MATCH expression Connect builds: every word quoted, all required.
    return [
        f"/{db.sqlite_path.stem}/search_segments.json?"
        + urllib.parse.urlencode({"q": " ".join(f'"{w}"' for w in q.split()), "ws": ws})
        for q in queries
    ]


def cpu_idle_fraction(window_s: float = 0.5) -> float:
    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total

    idle0, total0 = sample()
    time.sleep(window_s)
    idle1, total1 = sample()
    return (idle1 - idle0) / max(1, total1 - total0)


def drain(servers: dict, limit_s: float = 120.0, idle: float = 0.85) -> float:
    """Wait until the machine is idle again: a run of slow requests (search) leaves work
    behind after wrk stops (queued requests, and database queries that go on after the client
    hung up), which would otherwise be charged to whatever endpoint is measured next. A probe
    request cannot tell: it may find a free thread while the database is still busy."""
    del servers  # every server shares the machine; idleness is what matters
    started = time.monotonic()
    while time.monotonic() - started < limit_s and cpu_idle_fraction() < idle:
        pass
    return time.monotonic() - started


def tcp_sockets(port: int, *, remote: bool = False) -> list[tuple[str, str, str, str]]:
    """(local address, remote address, inode, state) of the TCP sockets (IPv4 and IPv6) whose
    local port, or remote port when `remote`, is `port`, from /proc/net (hex, as the kernel
    writes them: state 01 is ESTABLISHED; a closed socket lingering in FIN_WAIT has inode 0)."""
    column = 2 if remote else 1
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[column].rsplit(":", 1)[1], 16) == port:
                rows.append((fields[1], fields[2], fields[9], fields[3]))
    return rows


def socket_inodes(port: int, *, remote: bool = False) -> set[str]:
    """The inodes of the TCP sockets whose local port, or remote port when `remote`, is `port`."""
    return {inode for _, _, inode, _ in tcp_sockets(port, remote=remote)}


def backend_cpu(cursor) -> float:
    """CPU seconds used so far by the PostgreSQL backend serving `cursor`'s connection."""
    cursor.execute("SELECT pg_backend_pid()")
    (pid,) = cursor.fetchone()
    return cpu_seconds(pid)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time used so far by `pid` and every process below it (the server's
    workers): CPU per request is the figure a busy machine disturbs least."""
    total = 0
    for one in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def pid_holding_socket(pids: list[int], inodes: set[str]) -> int | None:
    """The first of `pids` with a descriptor on one of the sockets `inodes`; None when none has
    (a process that exits meanwhile is passed over, and so is a descriptor closed between the
    listing and its reading: a busy process must not hide the one it still holds)."""
    for pid in pids:
        try:
            descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in descriptors:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return pid
    return None


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} cores ({cpu}), {system}, Python {platform.python_version()}"


# --- The application in this process -----------------------------------------------------------

READ_SCOPES = ["svc:sessions:read", "svc:transcripts:read", "svc:boards:read"]


def setup_django(**env: str) -> None:
    """For a script that runs the application in its own process: this checkout importable, the
    benchmark settings unless DJANGO_SETTINGS_MODULE says otherwise, development mode, warnings
    only, then `env` (which wins), then `django.setup()`."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    os.environ.setdefault("CONNECT_DEVELOPMENT", "1")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.update(env)
    import django

    django.setup()


def read_key(workspace, email: str, name: str) -> str:
    """A new API key with the read scopes, of a member `email` added to `workspace` (after
    `setup_django`)."""
    from apps.tenancy import services

    membership = services.add_member(workspace=workspace, email=email)
    return services.issue_api_key(membership=membership, scopes=READ_SCOPES, name=name).key
