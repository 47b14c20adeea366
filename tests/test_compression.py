"""Compression (issue 23 point 3): gzip for JSON and exports of 1 KiB and more when the client
accepts it, with `Vary: Accept-Encoding`; never on the event stream."""

from __future__ import annotations

import gzip

import pytest

from apps.recordings import services
from apps.recordings.services import SegmentInput
from tests import factories


@pytest.fixture
def long_meeting(acme):
    session = services.create_session(workspace=acme, label="Long")
    services.append_committed_segments(session=session, segments=[
        SegmentInput(timestamp_start=i * 1000, timestamp_end=i * 1000 + 900, text=f"Segment number {i} says ünïcode things.",
                     speaker_label=f"Speaker {i % 3}", confidence=0.5)
        for i in range(60)
    ])  # fmt: skip
    return session


def get(api, path, key, encoding=None, **params):
    headers = {"Authorization": f"Bearer {key}"}
    if encoding is not None:
        headers["Accept-Encoding"] = encoding
    return api.client.get(path, params, headers=headers)


@pytest.mark.parametrize("fmt", ["json", "vtt", "srt", "txt"])
def test_transcripts_are_gzipped_when_accepted(api, long_meeting, alice_key, fmt):
    path = f"/api/v1/sessions/{long_meeting.id}/transcript"
    plain = get(api, path, alice_key, format=fmt)
    assert "Content-Encoding" not in plain and len(plain.content) >= 1024
    assert "Accept-Encoding" in plain["Vary"]  # the answer depends on it even when not compressed
    packed = get(api, path, alice_key, encoding="gzip, deflate, br", format=fmt)
    assert packed["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in packed["Vary"] and "Accept" in packed["Vary"]
    assert gzip.decompress(packed.content) == plain.content
    assert len(packed.content) < len(plain.content) / 2
    # the tag is weakened (a different byte sequence) and still revalidates
    assert packed["ETag"] == "W/" + plain["ETag"]
    headers = {"Authorization": f"Bearer {alice_key}", "Accept-Encoding": "gzip", "If-None-Match": packed["ETag"]}
    assert api.client.get(path, {"format": fmt}, headers=headers).status_code == 304


def test_small_answers_and_clients_without_gzip_are_not_compressed(api, long_meeting, alice_key):
    small = get(api, f"/api/v1/sessions/{long_meeting.id}", alice_key, encoding="gzip")
    assert len(small.content) < 1024 and "Content-Encoding" not in small
    assert "Content-Encoding" not in get(api, f"/api/v1/sessions/{long_meeting.id}/transcript", alice_key,
                                         encoding="identity")  # fmt: skip
    error = get(api, "/api/v1/sessions/nope/transcript", alice_key, encoding="gzip")
    assert error.status_code == 404 and error.json() == {"error": "not_found"}


def test_the_event_stream_is_never_compressed(live_server_daphne, transactional_db, acme, alice):
    key = factories.api_key(alice)
    headers = {"Authorization": f"Bearer {key}", "Accept-Encoding": "gzip", "Accept": "text/event-stream"}
    with live_server_daphne.client() as http:
        with http.stream("GET", "/api/v1/events/stream", headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert "content-encoding" not in stream.headers
        # and the same server does compress a large JSON answer
        session = services.create_session(workspace=acme, label="Live")
        services.append_committed_segments(session=session, segments=[
            SegmentInput(timestamp_start=i, timestamp_end=i + 1, text="words " * 20, speaker_label=None, confidence=None)
            for i in range(20)
        ])  # fmt: skip
        response = http.get(f"/api/v1/sessions/{session.id}/transcript", headers=headers)
        assert response.status_code == 200 and response.headers["content-encoding"] == "gzip"
        assert len(response.json()["transcript"]) == 20  # httpx decompressed it
