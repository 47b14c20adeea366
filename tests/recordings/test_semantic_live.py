"""Search by meaning on a live `serve` with its task cluster: segments a producer appends over
HTTP get their vectors from the task queued after their commit, and are then found by a question
in other words, on REST and MCP."""

from __future__ import annotations

import time

import httpx
import pytest

from apps.recordings.models import SegmentEmbedding
from apps.tenancy import services as tenancy
from tests import factories
from tests.recordings.semantic_set import needs_extra
from tests.servers import start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_extra]

LINES = ["Okay, the offsite numbers.", "Finance said we can't spend more than forty thousand this quarter.",
         "Priya will call the hotel about breakfast."]  # fmt: skip
# Generous: on a loaded 2-core machine the cluster's worker imports torch and loads the model
# before its first task. The bound only matters when the task never runs.
WAIT_SECONDS = 240


def test_appended_segments_are_found_by_meaning_once_their_task_ran(tmp_path, alice, globex):
    factories.session(globex, committed=LINES)  # another workspace's, never embedded by this server's tasks
    ingest_key = tenancy.issue_ingest_key(membership=alice).key
    read_key = factories.api_key(alice, factories.READ_SCOPES)
    server = start(tmp_path, tasks=True, env={"CONNECT_SEMANTIC_SEARCH": "1"})
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            producer = {"Authorization": f"Bearer {ingest_key}"}
            assert client.put("/api/v1/ingest/sessions/offsite", json={}, headers=producer).status_code == 201
            segments = [{"sequence": i, "timestampStart": i * 1000, "timestampEnd": i * 1000 + 900, "text": text}
                        for i, text in enumerate(LINES)]  # fmt: skip
            answer = client.post("/api/v1/ingest/sessions/offsite/segments", json={"segments": segments},
                                 headers=producer)  # fmt: skip
            assert answer.status_code == 200, answer.text
            reader = {"Authorization": f"Bearer {read_key}"}
            params = {"query": "What did we decide about the budget?", "mode": "semantic"}
            deadline = time.monotonic() + WAIT_SECONDS
            while True:
                body = client.get("/api/v1/transcripts/search", params=params, headers=reader).json()
                if body["items"] or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert body["items"], f"no vectors after {WAIT_SECONDS} s; see {server.log}"
            assert body["items"][0]["sequence"] == 1 and "forty thousand" in body["items"][0]["snippet"]
            mcp = client.post("/mcp", headers={**reader, "Accept": "application/json, text/event-stream",
                                               "MCP-Protocol-Version": "2025-11-25"},
                              json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                    "params": {"name": "search_transcripts", "arguments": {**params, "limit": 1}}})  # fmt: skip
            assert mcp.status_code == 200, mcp.text
            assert mcp.json()["result"]["structuredContent"]["items"][0]["sequence"] == 1
    finally:
        server.stop()
    # One vector per appended segment, all of this workspace.
    assert sorted(SegmentEmbedding.objects.values_list("workspace_id", flat=True)) == [alice.workspace_id] * 3
