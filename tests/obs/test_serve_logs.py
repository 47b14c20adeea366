"""With `CONNECT_LOG_FORMAT=json`, everything `serve` writes is JSON lines: its own (the banner,
a child's restart), its servers', its task side's and Python warnings alike; a request with a
Host this service does not answer for is one WARNING line, not an ERROR with a traceback."""

from __future__ import annotations

import json
import os
import signal

import httpx
import pytest

from tests.servers import alive, cmdline_of, descendants, start, wait_until
from tests.test_request_heads import MALFORMED, exchange

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def daphnes(server) -> list[int]:
    return sorted(p for p in descendants(server.process.pid) if b"daphne" in cmdline_of(p) and alive(p))


@pytest.fixture(scope="module")
def json_server(django_db_setup, django_db_blocker, tmp_path_factory):
    """`serve --workers 2` with its task side and JSON logs; static files from a directory that
    does not exist, so that each server warns (a Python warning) as it starts."""
    server = start(
        tmp_path_factory.mktemp("json-serve"), workers=2, tasks=True,
        env={"CONNECT_LOG_FORMAT": "json", "STATIC_ROOT": str(tmp_path_factory.mktemp("static") / "missing")},
    )  # fmt: skip
    yield server
    server.stop()


def records(server) -> list[dict]:
    return [json.loads(line) for line in server.log.read_text().splitlines() if line.strip()]


def test_a_disallowed_host_is_one_warning_line(json_server):
    response = httpx.get(f"{json_server.url}/healthz", headers={"Host": "evil.example"}, timeout=60)
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"
    request_id = response.headers["X-Request-Id"]
    wait_until(lambda: any(r.get("logger") == "connect.access" and r.get("request_id") == request_id
                           for r in records(json_server)), what="the access line", timeout=60)  # fmt: skip
    lines = [r for r in records(json_server) if r.get("request_id") == request_id]
    host_lines = [r for r in lines if r["logger"] == "django.security.DisallowedHost"]
    assert len(host_lines) == 1 and host_lines[0]["level"] == "WARNING", lines
    assert "evil.example" in host_lines[0]["message"]
    assert all(r["level"] in ("INFO", "WARNING") and "exc_info" not in r for r in lines), lines


def test_everything_serve_writes_is_json(json_server):
    """Read after a task side has started, a refused head, and a server process killed and
    restarted; the server then stops, and its last lines are read too."""
    wait_until(lambda: sum(b"qcluster" in cmdline_of(p) for p in descendants(json_server.process.pid)) >= 2,
               what="the task side", timeout=120)  # fmt: skip
    assert exchange(json_server.url, MALFORMED["CR in a header value"][0])[0] == 400
    victim = daphnes(json_server)[0]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(daphnes(json_server)) == 2 and victim not in daphnes(json_server),
               what="the killed server replaced", timeout=120)  # fmt: skip
    wait_until(lambda: httpx.get(f"{json_server.url}/healthz", timeout=60).status_code == 200,
               what="serving", timeout=60)  # fmt: skip
    json_server.stop()
    lines = [line for line in json_server.log.read_text().splitlines() if line.strip()]
    not_json = []
    for line in lines:
        try:
            assert isinstance(json.loads(line), dict)
        except (ValueError, AssertionError):
            not_json.append(line)
    assert not_json == [], not_json
    loggers = {r["logger"] for r in records(json_server)}
    # The supervisor's own lines, a server's, the refused head's, a captured warning's, the task side's.
    assert {"apps.core.management.commands.serve", "engine.serve", "daphne.server",
            "engine.http_limits", "py.warnings"} <= loggers, loggers  # fmt: skip
    assert any(name.startswith("django-q") for name in loggers), loggers
