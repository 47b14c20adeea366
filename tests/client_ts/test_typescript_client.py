"""The TypeScript client (clients/typescript) against live servers: this module starts them,
seeds a workspace, and runs the package's own tests (`node --test`) with what they need in
their environment; node's output is shown when they fail.

Two servers, started side by side: the main one with the task cluster (webhook deliveries
reach a receiver the node tests run), and one whose rate limit is 3 requests per 5-second
window (the retry and `RateLimited` tests). The package's dependencies (`typescript`,
`openapi-typescript`, dev only) are installed by `npm ci` into clients/typescript/node_modules
once, and again only when package-lock.json changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from apps.tenancy import services as tenancy
from tests import factories
from tests.servers import ROOT, start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PACKAGE = ROOT / "clients" / "typescript"
QUEUE_NAME = f"connect-ts-test-{os.getpid()}"
MAIN_ENV = {
    "CONNECT_Q_NAME": QUEUE_NAME,
    "CONNECT_WEBHOOKS_ALLOW_PRIVATE": "1",  # the receiver listens on 127.0.0.1
    "CONNECT_WEBHOOK_RETRY_SCHEDULE": "0,0,0,0,0,0",
    "CONNECT_WEBHOOK_SWEEP_SECONDS": "0.2",
    "CONNECT_Q_WORKERS": "1",
    # A ping a second: the stream test's heartbeat timeout (5 s) then only ends a silenced connection.
    "CONNECT_SSE_HEARTBEAT_SECONDS": "1",
}
LIMITED_ENV = {"CONNECT_RATE_LIMIT_PER_CREDENTIAL": "3", "CONNECT_RATE_LIMIT_WINDOW_SECONDS": "5"}
SESSIONS = 5  # listed two per page: three pages


def run(command: list[str], env: dict[str, str] | None = None, timeout: float = 600,
        cwd: Path = PACKAGE) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)


def show(result: subprocess.CompletedProcess) -> str:
    return f"$ {' '.join(result.args)}\n--- stdout\n{result.stdout[-20000:]}\n--- stderr\n{result.stderr[-8000:]}"


@pytest.fixture(scope="module")
def package():
    """clients/typescript with its dev dependencies installed and `dist/` built: the install
    command of docs/typescript-client.md (its `prepare` script builds) when node_modules is
    missing or older than package-lock.json, else only the (incremental) build."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed: the TypeScript client cannot be built here")
    installed = PACKAGE / "node_modules" / ".package-lock.json"
    lock = PACKAGE / "package-lock.json"
    if not installed.is_file() or installed.stat().st_mtime < lock.stat().st_mtime:
        result = run(["npm", "--prefix", "clients/typescript", "ci"], cwd=ROOT)
    else:
        result = run(["node", "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"])
    assert result.returncode == 0, show(result)
    assert (PACKAGE / "dist" / "index.js").is_file() and (PACKAGE / "dist" / "index.d.ts").is_file()
    return PACKAGE


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker, tmp_path_factory):
    with ThreadPoolExecutor(2) as pool:
        main = pool.submit(start, tmp_path_factory.mktemp("ts-main"), tasks=True, env=MAIN_ENV)
        limited = pool.submit(start, tmp_path_factory.mktemp("ts-limited"), env=LIMITED_ENV)
        started = [main.result(), limited.result()]
    yield started
    for server in started:
        server.stop()


def seed(alice) -> dict[str, str]:
    """What the node tests read: sessions at distinct times (the newest with transcripts), and
    keys: every read and webhook scope, reads only, an ingest key, a deactivated member's."""
    start_at = datetime.now(timezone.utc) - timedelta(hours=1)
    sessions = [factories.session(alice.workspace, label=f"TS {i}", at=start_at + timedelta(minutes=i))
                for i in range(SESSIONS - 1)]
    full = factories.session(alice.workspace, label="TS transcript", at=start_at + timedelta(minutes=SESSIONS),
                             committed=["hello typescript", "the quarterly numbers"],
                             final=["Hello, TypeScript.", "The quarterly numbers."])
    sessions.append(full)
    gone = factories.member(alice.workspace, "gone@acme.test")
    gone_key = factories.api_key(gone, factories.ALL_SCOPES)
    tenancy.deactivate_member(membership=gone)
    return {
        "CONNECT_TEST_KEY": factories.api_key(alice, factories.ALL_SCOPES),
        "CONNECT_TEST_READ_KEY": factories.api_key(alice, factories.READ_SCOPES),
        "CONNECT_TEST_INGEST_KEY": tenancy.issue_ingest_key(membership=alice).key,
        "CONNECT_TEST_FORBIDDEN_KEY": gone_key,
        "CONNECT_TEST_SESSION_IDS": ",".join(s.id for s in reversed(sessions)),  # newest first
        "CONNECT_TEST_TRANSCRIPT_SESSION": full.id,
    }


IMPORT_CHECK = (
    'import { Connect, verifyWebhook, NotFound } from "connect-client";\n'
    'const client = new Connect({ baseUrl: "http://127.0.0.1:9", apiKey: "svc_x" });\n'
    'console.log(typeof client.sessions.list, typeof verifyWebhook, new NotFound({ status: 404, code: "not_found" }).status);\n'
)


def imports_in(project: Path) -> list[str]:
    (project / "main.mjs").write_text(IMPORT_CHECK)
    imported = subprocess.run(["node", "main.mjs"], cwd=project, capture_output=True, text=True, timeout=60)
    assert imported.returncode == 0, imported.stderr
    return imported.stdout.split()


def test_installs_from_the_folder_and_packs(package, tmp_path):
    """`npm install <checkout>/clients/typescript` in a project, and `npm pack`'s tarball (the
    built ESM and its declarations, no tests, no node_modules), each import in plain Node
    without the package's dev dependencies."""
    from_folder = tmp_path / "from-folder"
    from_folder.mkdir()
    result = run(["npm", "install", "--no-audit", "--no-fund", "--offline", str(PACKAGE)], cwd=from_folder)
    assert result.returncode == 0, show(result)
    assert imports_in(from_folder) == ["function", "function", "404"]

    result = run(["npm", "pack", "--pack-destination", str(tmp_path), "--ignore-scripts"])
    assert result.returncode == 0, show(result)
    [tarball] = tmp_path.glob("connect-client-*.tgz")
    from_tarball = tmp_path / "from-tarball"
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
        assert {"package/dist/index.js", "package/dist/index.d.ts", "package/package.json",
                "package/README.md"} <= names, sorted(names)
        assert not any("/node_modules/" in name or name.startswith(("package/test/", "package/testing/"))
                       for name in names), sorted(names)
        archive.extractall(from_tarball / "node_modules", filter="data")
    (from_tarball / "node_modules" / "package").rename(from_tarball / "node_modules" / "connect-client")
    assert imports_in(from_tarball) == ["function", "function", "404"]


def test_node_suite_against_live_servers(package, servers, alice):
    main, limited = servers
    env = {
        **seed(alice),
        "CONNECT_TEST_BASE_URL": main.url,
        "CONNECT_TEST_LIMITED_URL": limited.url,
        "CONNECT_TEST_LIMITED_KEY": factories.api_key(alice, factories.ALL_SCOPES),
        # The client's own variables are the tests' to set (the README's quick start reads them).
        "CONNECT_BASE_URL": "",
        "CONNECT_API_KEY": "",
    }
    result = run(["node", "--test", "--test-reporter=spec", "--test-concurrency=2", "test/"], env=env, timeout=900)
    assert result.returncode == 0, show(result)
    assert "# fail 0" in result.stdout or "ℹ fail 0" in result.stdout, show(result)
