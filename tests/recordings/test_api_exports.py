"""Transcript exports through REST (issue 23 point 1): `format=` and `Accept` on both
transcript paths, read back with webvtt-py and `srt`; scopes and tenancy in every format."""

from __future__ import annotations

import html
import io

import pytest
import srt
import webvtt

from apps.recordings import services
from apps.recordings.services import SegmentInput
from tests import factories

FORMATS = ["json", "vtt", "srt", "txt"]
MEDIA = {"vtt": "text/vtt", "srt": "application/x-subrip", "txt": "text/plain", "json": "application/json"}


def seg(start, end, speaker, text):
    return SegmentInput(timestamp_start=start, timestamp_end=end, text=text, speaker_label=speaker, confidence=None)


LIVE = [
    seg(0, 2000, "Ana", "Guten Morgen, 日本語 & <friends>."),
    seg(2000, 2000, "Ana", "Zero."),
    seg(2500, 4000, "", "No label here."),
    seg(4000, 10000, "Bo", " ".join(f"word{i}" for i in range(40))),
]


@pytest.fixture
def meeting(acme):
    session = services.create_session(workspace=acme, label="Q3 Planning: Köln/Berlin")
    services.append_committed_segments(session=session, segments=LIVE)
    return session


def get(api, path, key, accept=None, **params):
    headers = {"Authorization": f"Bearer {key}"}
    if accept:
        headers["Accept"] = accept
    return api.client.get(path, params, headers=headers)


def test_vtt_export_reads_back(api, meeting, alice_key):
    response = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, format="vtt")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/vtt; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="Q3-Planning-Köln-Berlin.vtt"' or (
        "filename*=utf-8''Q3-Planning-K%C3%B6ln-Berlin.vtt" in response["Content-Disposition"]
    )
    captions = list(webvtt.from_buffer(io.StringIO(response.content.decode())))
    assert [html.unescape(c.text) for c in captions] == [s.text for s in LIVE]
    assert [c.voice for c in captions] == ["Ana", "Ana", None, "Bo"]
    assert captions[1].start == "00:00:02.000" and captions[1].end == "00:00:02.001"


def test_srt_export_reads_back(api, meeting, alice_key):
    response = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, format="srt")
    assert response["Content-Type"] == "application/x-subrip; charset=utf-8"
    subtitles = list(srt.parse(response.content.decode()))
    assert [s.index for s in subtitles] == [1, 2, 3, 4]
    assert subtitles[0].content == "Ana: Guten Morgen, 日本語 & <friends>."
    assert subtitles[2].content == "No label here."


def test_max_cue_chars_splits_long_segments(api, meeting, alice_key):
    response = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, format="srt", maxCueChars="42")
    subtitles = list(srt.parse(response.content.decode()))
    long = [s for s in subtitles if s.content.startswith("Bo: ")]
    assert len(long) > 1 and all(len(s.content.removeprefix("Bo: ")) <= 42 for s in long)
    assert " ".join(s.content.removeprefix("Bo: ") for s in long) == LIVE[3].text
    assert long[0].start.total_seconds() == 4 and long[-1].end.total_seconds() == 10
    vtt = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, format="vtt", maxCueChars="42")
    captions = [c for c in webvtt.from_buffer(io.StringIO(vtt.content.decode())) if c.voice == "Bo"]
    assert " ".join(c.text for c in captions) == LIVE[3].text


def test_txt_export_is_speaker_turns(api, meeting, alice_key):
    response = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, format="txt")
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == (
        f"Ana: {LIVE[0].text} Zero.\n\nNo label here.\n\nBo: {LIVE[3].text}\n"
    )


@pytest.mark.parametrize("fmt", ["vtt", "srt", "txt"])
def test_accept_header_chooses_the_same_export(api, meeting, alice_key, fmt):
    by_param = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, format=fmt)
    by_accept = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, accept=MEDIA[fmt])
    assert by_accept.status_code == 200 and by_accept.content == by_param.content
    assert by_accept["Content-Type"] == by_param["Content-Type"]
    assert "Accept" in by_accept["Vary"]


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "text/html", "application/json, text/vtt;q=0.5"])
def test_json_stays_the_default(api, meeting, alice_key, accept):
    response = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, accept=accept)
    assert response["Content-Type"] == "application/json" and "Content-Disposition" not in response
    assert [s["text"] for s in response.json()["transcript"]] == [s.text for s in LIVE]


def test_format_parameter_wins_over_accept(api, meeting, alice_key):
    response = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, accept="text/vtt", format="json")
    assert response["Content-Type"] == "application/json"


def test_revision_aware_exports(api, meeting, alice_key):
    services.change_session_status(session=meeting, status="completed")
    services.write_final_transcript(session=meeting, segments=[seg(0, 3000, "Ana", "Final words."),
                                                               seg(3000, 5000, "Bo", "Final reply.")])  # fmt: skip
    path = f"/api/v1/sessions/{meeting.id}/transcripts"
    final = get(api, path, alice_key, revisionKind="final", format="srt")
    assert [s.content for s in srt.parse(final.content.decode())] == ["Ana: Final words.", "Bo: Final reply."]
    assert final["Content-Disposition"].endswith("-final.srt") or "-final.srt" in final["Content-Disposition"]
    committed = get(api, path, alice_key, revisionKind="committed", format="vtt")
    assert len(list(webvtt.from_buffer(io.StringIO(committed.content.decode())))) == len(LIVE)
    both = get(api, path, alice_key, format="txt").content.decode()
    assert both.startswith("Ana: Guten Morgen") and both.endswith("Ana: Final words.\n\nBo: Final reply.\n")
    # the flat path follows the final revision
    flat = get(api, f"/api/v1/sessions/{meeting.id}/transcript", alice_key, format="txt")
    assert flat.content.decode() == "Ana: Final words.\n\nBo: Final reply.\n"


@pytest.mark.parametrize("path", ["transcript", "transcripts"])
def test_empty_transcript_is_an_empty_file(api, acme, alice_key, path):
    session = factories.session(acme, label=None)
    for fmt, empty in [("vtt", b"WEBVTT\n"), ("srt", b""), ("txt", b"")]:
        response = get(api, f"/api/v1/sessions/{session.id}/{path}", alice_key, format=fmt)
        assert response.status_code == 200 and response.content == empty
        # no label: the file is named after the session id
        assert f"{session.id}.{fmt}" in response["Content-Disposition"]


@pytest.mark.parametrize(
    "params, detail",
    [
        ({"format": "pdf"}, "format: must be one of json, vtt, srt, txt"),
        ({"format": ""}, "format: must be one of json, vtt, srt, txt"),
        ({"format": "vtt", "maxCueChars": "0"}, "maxCueChars: must be an integer from 1 to 2000"),
        ({"format": "vtt", "maxCueChars": "ten"}, "maxCueChars: must be an integer from 1 to 2000"),
        ({"format": "txt", "maxCueChars": "10"}, "maxCueChars: applies to format vtt or srt only"),
        ({"maxCueChars": "10"}, "maxCueChars: applies to format vtt or srt only"),
    ],
)
@pytest.mark.parametrize("path", ["transcript", "transcripts"])
def test_bad_export_parameters_say_which_and_why(api, meeting, alice_key, params, detail, path):
    response = get(api, f"/api/v1/sessions/{meeting.id}/{path}", alice_key, **params)
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_request", "detail": detail}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("path", ["transcript", "transcripts"])
def test_another_workspaces_session_is_not_found_in_every_format(api, meeting, bob_key, fmt, path):
    for how in ({"format": fmt}, {"accept": MEDIA[fmt]}):
        response = get(api, f"/api/v1/sessions/{meeting.id}/{path}", bob_key, **how)
        assert response.status_code == 404 and response.json() == {"error": "not_found"}
        assert "Content-Disposition" not in response


@pytest.mark.parametrize("fmt", FORMATS)
def test_exports_need_the_transcripts_scope(api, meeting, alice, fmt):
    key = factories.api_key(alice, scopes=["svc:sessions:read", "svc:boards:read"])
    for path in ("transcript", "transcripts"):
        response = get(api, f"/api/v1/sessions/{meeting.id}/{path}", key, format=fmt)
        assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_credential_is_401_in_every_format(api, meeting, fmt):
    response = api.client.get(f"/api/v1/sessions/{meeting.id}/transcript", {"format": fmt})
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"


@pytest.mark.parametrize("path", ["/api/v1/sessions/{id}/transcript", "/api/v1/sessions/{id}/transcripts"])
def test_openapi_documents_the_export_media_types(api, db, path):
    operation = api.client.get("/openapi.json").json()["paths"][path]["get"]
    assert set(operation["responses"]["200"]["content"]) == set(MEDIA.values())
    assert "304" in operation["responses"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"format", "maxCueChars", "If-None-Match"} <= names
