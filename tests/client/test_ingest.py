"""The client's ingest namespace against a live `serve`: a recorder's whole loop, a conflict that
says what to send next, and a write whose answer was lost, retried by the client itself with the
same `Idempotency-Key` and answered with the first answer."""

from __future__ import annotations

import connect_client
import httpx
import pytest
from connect_client import IngestSegment

from apps.events.models import Event
from apps.recordings.models import Segment
from apps.tenancy import services as tenancy

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def ingest_key(alice) -> str:
    return tenancy.issue_ingest_key(membership=alice).key


def spoken(first: int, count: int) -> list[IngestSegment]:
    return [IngestSegment(i, i * 1000, i * 1000 + 900, f"line {i}", speaker_label="Ana", confidence=0.5)
            for i in range(first, first + count)]


def test_a_recorders_loop_through_the_client(live, ingest_key, client):
    with connect_client.Connect(live.url, ingest_key=ingest_key, timeout=30) as recorder:
        sessions = recorder.ingest.sessions
        created = sessions.upsert("call-7", label="Call 7")
        assert created.external_id == "call-7" and created.session.status == "recording"
        assert sessions.append_segments("call-7", spoken(0, 3)).next_sequence == 3
        again = sessions.append_segments("call-7", spoken(0, 3))
        assert (again.appended, again.acknowledged) == (0, 3)
        with pytest.raises(connect_client.errors.Conflict) as gap:
            sessions.append_segments("call-7", spoken(5, 1))
        assert gap.value.expected_sequence == 3
        assert sessions.set_status("call-7", "processing").session.status == "processing"
        final = sessions.put_final_transcript("call-7", [IngestSegment(0, 0, 2900, "Line 0. Line 1. Line 2.")])
        assert final.segment_count == 1
        board = sessions.put_board("call-7", "summary", {"bullets": ["three lines"]})
        assert board.version == 1 and board.payload_hash.startswith("sha256:")
        sessions.set_status("call-7", "completed")
        with pytest.raises(connect_client.errors.InsufficientScope):
            recorder.sessions.get(created.id)
    transcript = client.transcripts.get(created.id)
    assert [s.text for s in transcript.transcript] == ["Line 0. Line 1. Line 2."]
    assert client.boards.get(created.id, "summary").payload == {"bullets": ["three lines"]}


class LosesTheFirstAnswer(httpx.BaseTransport):
    """Sends every request, and drops the answer to the first write that carries an
    Idempotency-Key, as a network that fails after the server committed would."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.keys: list[str] = []
        self.replayed: list[bool] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        key = request.headers.get("Idempotency-Key")
        if key is not None:
            response.read()
            self.keys.append(key)
            self.replayed.append(response.headers.get("Idempotent-Replayed") == "true")
            if len(self.keys) == 2:  # the append's first answer
                raise httpx.ReadError("connection reset after the server answered")
        return response


def test_a_lost_answer_is_retried_with_the_same_key_and_applied_once(live, ingest_key):
    transport = LosesTheFirstAnswer()
    http = httpx.Client(base_url=live.url, transport=transport, timeout=30)
    recorder = connect_client.Connect(live.url, ingest_key=ingest_key, http_client=http)
    recorder.ingest.sessions.upsert("call-8")
    result = recorder.ingest.sessions.append_segments("call-8", spoken(0, 4))
    assert (result.appended, result.acknowledged) == (4, 0)  # the first answer, sent again
    assert transport.keys[1] == transport.keys[2] and transport.replayed[1:] == [False, True]
    assert Segment.objects.filter(transcript__session__external_id="call-8").count() == 4
    assert Event.objects.filter(type="transcript.segment.created").count() == 4
    http.close()


@pytest.mark.anyio
async def test_the_async_client_has_the_same_namespace(live, ingest_key):
    async with connect_client.AsyncConnect(live.url, ingest_key=ingest_key, timeout=30) as recorder:
        created = await recorder.ingest.sessions.upsert("call-9", memo="async")
        appended = await recorder.ingest.sessions.append_segments("call-9", [s.to_wire() for s in spoken(0, 2)])
    assert created.session.memo == "async" and appended.next_sequence == 2


def test_one_credential_per_client():
    with pytest.raises(ValueError, match="exactly one"):
        connect_client.Connect("http://127.0.0.1:1", api_key="svc_a", ingest_key="svc_b")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_the_ingest_page_client_block_runs(live, ingest_key, capsys):
    from tests import docs
    from tests.servers import ROOT

    [block] = [b for b in docs.blocks(ROOT / "docs" / "ingest.md") if b.info == "python ingest-client"]
    source = block.text.replace("http://127.0.0.1:8000", live.url).replace("svc_…", ingest_key)
    exec(compile(source, "docs/ingest.md", "exec"), {})  # noqa: S102 - the page's own example
    assert capsys.readouterr().out.split() == ["2", "completed"]
    assert Segment.objects.filter(transcript__session__external_id="meeting-43").count() == 3
