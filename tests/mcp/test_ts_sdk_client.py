"""The official TypeScript MCP SDK client (`@modelcontextprotocol/sdk` from npm, pinned in
bench/mcp_ts_sdk/package-lock.json) against a live server: bench/mcp_ts_sdk/client.mjs connects
with the SDK's own handshake, lists the resource templates and reads a transcript resource page
by page through its continuation URIs; the segments it got are REST's, in REST's order.

Needs node and the pinned packages (`npm ci` in bench/mcp_ts_sdk); skipped, saying so, without them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from apps.mcp.resources import TEMPLATES
from tests import factories

CLIENT = Path(__file__).resolve().parents[2] / "bench" / "mcp_ts_sdk"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("node") is None or not (CLIENT / "node_modules" / "@modelcontextprotocol").is_dir(),
                       reason="needs node and `npm ci` in bench/mcp_ts_sdk"),
]


def test_the_typescript_sdk_lists_templates_and_reads_a_whole_transcript(live_server_daphne, alice, settings):
    key = factories.api_key(alice, factories.READ_SCOPES)
    # Long enough to need more than one page of the result budget.
    session = factories.session(alice.workspace, label="Long", committed=[f"line {n} " + "word " * 60
                                                                         for n in range(400)])
    out = subprocess.run(["node", "client.mjs"], cwd=CLIENT, capture_output=True, text=True, timeout=120, env={
        "PATH": shutil.which("node").rsplit("/", 1)[0], "CONNECT_URL": live_server_daphne.url,
        "CONNECT_KEY": key, "SESSION_ID": session.id})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["protocolVersion"] == "2025-11-25" and got["server"]["name"] == "connect"
    assert got["templates"] == [t["uriTemplate"] for t in TEMPLATES]
    assert len(got["pages"]) > 1 and {p["mimeType"] for p in got["pages"]} == {"application/json"}
    rest = httpx.get(f"{live_server_daphne.url}/api/v1/sessions/{session.id}/transcript",
                     headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
    assert got["segmentIds"] == [s["id"] for s in rest["transcript"]]
