"""docs/ingest.md runs as written: its `issue_ingest_key` line prints a key, and its curl loop,
with that key and a live server's URL in place of the page's, leaves a completed session with
its segments, final revision and board (the Python block runs in tests/client/test_ingest.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from apps.events.models import Event
from apps.recordings.models import BoardContent, Session
from tests import docs
from tests.servers import ROOT, server_env, start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAGE = ROOT / "docs" / "ingest.md"


def sh_block(containing: str) -> str:
    [text] = [b.text for b in docs.blocks(PAGE) if b.info == "sh" and containing in b.text]
    return text


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    live = start(tmp_path_factory.mktemp("ingest-docs"))
    yield live
    live.stop()


def test_the_ingest_page_runs(server, alice):
    issue = sh_block("manage.py issue_ingest_key").strip()
    done = subprocess.run(["bash", "-c", issue], cwd=ROOT, env=server_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip().splitlines()[-1]
    assert key.startswith("svc_")
    loop = sh_block("INGEST_KEY=").replace("http://127.0.0.1:8000", server.url).replace("svc_…", key)
    done = subprocess.run(["bash", "-e", "-c", loop], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    session = Session.objects.get(external_id="meeting-42", workspace=alice.workspace)
    assert session.status == "completed" and session.label == "Weekly sync"
    assert session.transcripts.get(revision_kind="committed").segments.count() == 2
    assert session.transcripts.get(revision_kind="final").segments.count() == 1
    assert BoardContent.objects.get(session=session).payload == {"bullets": ["Roadmap first"]}
    assert Event.objects.filter(session_id=session.id, type="transcript.segment.created").count() == 2
