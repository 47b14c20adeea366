"""Live `manage.py serve` processes with their own environment, for tests that need settings
the shared `live_server_daphne` does not have (DEBUG-off static files, small limits, a short
timeout, a broken database), and one `collectstatic` per test session."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, LiveServer, database_url_for_test_db, free_port


@contextmanager
def serve(log_dir: Path, *, workers: int = 1, env: dict[str, str] | None = None) -> Iterator[LiveServer]:
    """Start a server on this worker's test database (unless env says otherwise); stop it after.
    Ready when `/healthz` answers (it touches no database, so a broken database still starts)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    full_env = {
        **os.environ,
        "DATABASE_URL": database_url_for_test_db(),
        "CONNECT_BASE_URL": url,
        "CONNECT_DEVELOPMENT": "1",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    full_env.pop("DEBUG", None)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"server-{port}.log", "w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", str(workers), "--no-tasks"],
        cwd=ROOT,
        env=full_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start; see {log.name}")
            time.sleep(0.2)
        yield LiveServer(url=url, process=process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


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
