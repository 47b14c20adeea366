"""Live `manage.py serve` processes for the end-to-end tests: one way to start one (a free
port, this worker's test database, ready when `/healthz` answers), to stop it, and one
`collectstatic` per test session."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
# Generous: on a loaded 2-core machine daphne, the task cluster and the sweeper have taken a
# minute to import. The bound only matters when a server never comes up.
START_SECONDS = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], object], *, what: str, timeout: float, every: float = 0.1):
    """`predicate()`'s first truthy value, polled every `every` seconds; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def database_url_for_test_db() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def server_env(base_url: str | None = None, **overrides: str) -> dict[str, str]:
    """The environment of a process of the service under test: this worker's test database,
    production settings (no DEBUG) with the development secret allowed, a generous lane queue
    bound, then `overrides`."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_test_db(),
        "CONNECT_BASE_URL": base_url or settings.CONNECT_BASE_URL,
        "CONNECT_DEVELOPMENT": "1",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONUNBUFFERED": "1",
        # Bursts of a test's own (32 clients at once) may queue for a lane longer than the
        # 2 s default on a busy machine; shedding is tested with its own bound (test_overload).
        "CONNECT_QUEUE_TIMEOUT_SECONDS": "60",
    }
    env.pop("DEBUG", None)
    env.update(overrides)
    return env


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name: state, parent, …; [] once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def parent_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def alive(pid: int) -> bool:
    """Running, not gone and not a zombie waiting to be reaped."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] != "Z"


def started_at(pid: int) -> str | None:
    """When `pid` started (clock ticks after boot): with the pid, names one process for good."""
    fields = _stat_fields(pid)
    return fields[19] if fields else None


def cmdline_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, …), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            ppid = parent_of(int(entry.name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen
    port: int = 0
    log: Path | None = None
    env: dict[str, str] = field(default_factory=dict, repr=False)

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10, **kwargs)

    def stop(self) -> None:
        """Stops `serve`, then kills whatever of its processes outlived it. A `serve` killed
        before it had stopped its task cluster left the cluster's sentinel and workers running,
        orphaned, on the test database: they went on claiming the deliveries of later tests,
        which then saw attempts made by processes of no server of theirs."""
        family = {pid: started_at(pid) for pid in descendants(self.process.pid)}
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        for pid, started in family.items():
            if alive(pid) and started_at(pid) == started:  # the same process, not a reused pid
                print(f"serve {self.process.pid} left {pid} running: {cmdline_of(pid)!r}; killed", file=sys.stderr)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def start(
    log_dir: Path,
    *,
    port: int | None = None,
    workers: int = 1,
    tasks: bool = False,
    base_url: str | None = None,
    env: dict[str, str] | None = None,
    kind: type[LiveServer] = LiveServer,
) -> LiveServer:
    """Start `manage.py serve` and wait until it answers. `base_url` defaults to the server's own
    address. A server that does not come up is stopped, never left running against a database
    the session deletes.

    Only servers that ask for `tasks` run the django-q2 cluster and the webhook sweeper: the
    servers of one test worker share its database, and another server's sweeper, with the
    default schedule and leases, would claim the webhook tests' due deliveries and retry them
    minutes later on its own queue (a webhook live test then waited 90 s for nothing)."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    full_env = server_env(base_url or url, **(env or {}))
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"serve-{port}-{time.monotonic_ns()}.log"
    command = [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", str(workers)]
    with log.open("w") as out:  # the child keeps its own descriptor
        process = subprocess.Popen(
            command if tasks else [*command, "--no-tasks"], cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT
        )
    server = kind(url=url, process=process, port=port, log=log, env=full_env)
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"server did not start; see {log}")
        time.sleep(0.2)


@contextmanager
def serve(log_dir: Path, *, workers: int = 1, env: dict[str, str] | None = None) -> Iterator[LiveServer]:
    """A server with settings of the test's own (DEBUG-off static files, small limits, a short
    timeout, a broken database: `/healthz` touches no database, so that one starts too); stopped
    after."""
    server = start(log_dir, workers=workers, env=env)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory) -> Path:
    """`collectstatic` as production runs it (hashed names, compressed copies), into a temp dir."""
    root = tmp_path_factory.mktemp("static")
    env = {**os.environ, "STATIC_ROOT": str(root), "CONNECT_DEVELOPMENT": "1", "DJANGO_SETTINGS_MODULE": "tests.settings"}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT, env=env, check=True, timeout=300, capture_output=True,
    )
    return root


# Rate-limit windows are aligned to the clock, so even an hour's window starts during a test
# that runs across a full hour (seen: the counts reset halfway at 21:00:00). One of 10^9 s next
# starts in May 2033. The counters' Redis keys expire after two windows, so the tests that use
# it delete them after (`forget_rate_limit_counts`).
UNTURNING_WINDOW_SECONDS = "1000000000"


def forget_rate_limit_counts() -> None:
    """Deletes this test database's rate-limit counters from Redis (when configured), or zeroes
    the counter file beside a SQLite file (in place: a process may still have it mapped): a live
    test with a window of 10^9 s would otherwise leave counts that last 2 × 10^9 s."""
    from django.conf import settings

    if not settings.REDIS_URL:
        counters = Path(f"{settings.DATABASES['default']['NAME']}-ratelimit")
        if counters.is_file():
            with counters.open("r+b") as f:
                f.write(bytes(counters.stat().st_size))
        return
    from apps.core.redis_clients import redis_client

    client = redis_client()
    keys = list(client.scan_iter(f"connect:ratelimit:{settings.DATABASES['default']['NAME']}:*"))
    if keys:
        client.delete(*keys)


def without_request_id(body: dict) -> dict:
    """A JSON error body without the `requestId` the door adds (apps/access/door.py), so a test
    can compare the contract's fields exactly; the id, when present, must be well-formed."""
    body = dict(body)
    request_id = body.pop("requestId", None)
    assert request_id is None or re.fullmatch(r"[A-Za-z0-9._-]{1,128}", request_id), request_id
    return body
