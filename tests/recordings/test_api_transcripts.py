"""docs/api/transcripts.md (the two per-session transcript paths)."""

from __future__ import annotations

import pytest

from apps.recordings import services
from apps.recordings.models import Segment
from tests import factories

FLAT_FIELDS = {"id", "sequence", "timestampStart", "timestampEnd", "speakerLabel", "text", "confidence", "createdAt"}
REVISION_SEGMENT_FIELDS = FLAT_FIELDS | {"sessionCommittedIndex"}


@pytest.fixture
def finished(acme):
    return factories.session(acme, committed=["one", "two", "three"], final=["One.", "Two and three."])


def test_revisions_contain_committed_and_final(api, finished, alice_key):
    body = api.get(f"/api/v1/sessions/{finished.id}/transcripts", alice_key).json()
    assert set(body) == {"transcripts"}
    kinds = {t["revisionKind"]: t for t in body["transcripts"]}
    assert set(kinds) == {"committed", "final"}
    for revision in body["transcripts"]:
        assert set(revision) == {"id", "revisionKind", "createdAt", "segments"}
        for segment in revision["segments"]:
            assert set(segment) == REVISION_SEGMENT_FIELDS
    assert [s["text"] for s in kinds["committed"]["segments"]] == ["one", "two", "three"]
    assert [s["text"] for s in kinds["final"]["segments"]] == ["One.", "Two and three."]


@pytest.mark.parametrize("kind", ["committed", "final"])
def test_revision_kind_filter(api, finished, alice_key, kind):
    body = api.get(f"/api/v1/sessions/{finished.id}/transcripts", alice_key, revisionKind=kind).json()
    assert [t["revisionKind"] for t in body["transcripts"]] == [kind]


@pytest.mark.parametrize("kind", ["", "draft", "FINAL"])
def test_bad_revision_kind_is_invalid_request(api, finished, alice_key, kind):
    response = api.get(f"/api/v1/sessions/{finished.id}/transcripts", alice_key, revisionKind=kind)
    detail = "revisionKind: must be one of committed, final"
    assert response.status_code == 400 and response.json() == {"error": "invalid_request", "detail": detail}


def test_committed_segments_follow_session_commit_index(api, acme, alice_key):
    session = factories.session(acme, committed=["a", "b", "c"])
    # Reorder commit indexes against sequence: the committed revision must follow the index.
    for segment, index in zip(Segment.objects.filter(transcript__session=session).order_by("sequence"), [2, 0, 1]):
        Segment.objects.filter(pk=segment.pk).update(session_committed_index=index + 10)
    body = api.get(f"/api/v1/sessions/{session.id}/transcripts", alice_key, revisionKind="committed").json()
    assert [s["text"] for s in body["transcripts"][0]["segments"]] == ["b", "c", "a"]


def test_flat_transcript_prefers_final(api, finished, alice_key):
    body = api.get(f"/api/v1/sessions/{finished.id}/transcript", alice_key).json()
    assert set(body) == {"sessionId", "transcript"}
    assert body["sessionId"] == finished.id
    assert [s["text"] for s in body["transcript"]] == ["One.", "Two and three."]
    assert all(set(s) == FLAT_FIELDS for s in body["transcript"])


def test_flat_transcript_falls_back_to_committed(api, acme, alice_key):
    session = factories.session(acme, committed=["live one", "live two"])
    body = api.get(f"/api/v1/sessions/{session.id}/transcript", alice_key).json()
    assert [s["text"] for s in body["transcript"]] == ["live one", "live two"]
    assert [s["sequence"] for s in body["transcript"]] == [0, 1]


def test_session_without_transcript_has_empty_lists(api, acme, alice_key):
    session = factories.session(acme)
    assert api.get(f"/api/v1/sessions/{session.id}/transcript", alice_key).json() == {
        "sessionId": session.id,
        "transcript": [],
    }
    assert api.get(f"/api/v1/sessions/{session.id}/transcripts", alice_key).json() == {"transcripts": []}


def test_nullable_segment_fields(api, acme, alice_key):
    session = services.create_session(workspace=acme)
    services.append_committed_segments(
        session=session, segments=[services.SegmentInput(timestamp_start=0, timestamp_end=900, text="hm")]
    )
    segment = api.get(f"/api/v1/sessions/{session.id}/transcript", alice_key).json()["transcript"][0]
    assert segment["speakerLabel"] is None and segment["confidence"] is None
    assert segment["timestampStart"] == 0 and segment["timestampEnd"] == 900


def test_appending_continues_sequence_and_commit_index(acme):
    session = factories.session(acme, committed=["a", "b"])
    services.append_committed_segments(session=session, segments=factories.segments(["c"]))
    rows = list(Segment.objects.filter(transcript__session=session).order_by("sequence"))
    assert [(s.sequence, s.session_committed_index) for s in rows] == [(0, 0), (1, 1), (2, 2)]


@pytest.mark.parametrize("path", ["transcripts", "transcript"])
def test_unknown_session_is_not_found(api, alice_key, path):
    response = api.get(f"/api/v1/sessions/nope/{path}", alice_key)
    assert response.status_code == 404 and response.json() == {"error": "not_found"}
