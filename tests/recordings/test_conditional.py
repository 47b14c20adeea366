"""Conditional requests (issue 23 point 2): strong ETags on session get, both transcript paths
(per format), the board list and a board; `If-None-Match` → 304 with no body, not counted
against the rate limit; the tag changes when what the answer is made of changes."""

from __future__ import annotations

import pytest
from django.test import override_settings

from apps.recordings import services
from apps.recordings.models import Session
from apps.recordings.services import SegmentInput
from tests import factories


def seg(text, start=0):
    return SegmentInput(timestamp_start=start, timestamp_end=start + 500, text=text, speaker_label="Ana", confidence=0.5)


@pytest.fixture
def meeting(acme):
    session = factories.session(acme, committed=["one", "two"])
    services.publish_board(session=session, board_id="summary", payload={"v": 1}, source_revision_kind="committed")
    return session


def get(api, path, key, etag=None, accept=None, **params):
    headers = {"Authorization": f"Bearer {key}"}
    if etag:
        headers["If-None-Match"] = etag
    if accept:
        headers["Accept"] = accept
    return api.client.get(path, params, headers=headers)


def paths(session):
    return [
        (f"/api/v1/sessions/{session.id}", {}),
        (f"/api/v1/sessions/{session.id}/transcript", {}),
        (f"/api/v1/sessions/{session.id}/transcript", {"format": "vtt"}),
        (f"/api/v1/sessions/{session.id}/transcript", {"format": "srt", "maxCueChars": "10"}),
        (f"/api/v1/sessions/{session.id}/transcripts", {}),
        (f"/api/v1/sessions/{session.id}/transcripts", {"revisionKind": "committed", "format": "txt"}),
        (f"/api/v1/sessions/{session.id}/boards", {}),
        (f"/api/v1/sessions/{session.id}/boards/summary", {}),
    ]


def test_every_tagged_answer_revalidates_to_an_empty_304(api, meeting, alice_key):
    for path, params in paths(meeting):
        first = get(api, path, alice_key, **params)
        assert first.status_code == 200, path
        etag = first["ETag"]
        assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/"), path
        assert first["Cache-Control"] == "private, no-cache"
        again = get(api, path, alice_key, etag=etag, **params)
        assert again.status_code == 304, (path, params)
        assert again.content == b""
        assert again["ETag"] == etag and again["Cache-Control"] == "private, no-cache"
        # a list of tags, a weak form of the tag (as a gzip layer hands it out) and * all match
        assert get(api, path, alice_key, etag=f'"nope", W/{etag}', **params).status_code == 304
        assert get(api, path, alice_key, etag="*", **params).status_code == 304
        assert get(api, path, alice_key, etag='"nope"', **params).status_code == 200


def test_each_format_has_its_own_tag(api, meeting, alice_key):
    path = f"/api/v1/sessions/{meeting.id}/transcript"
    tags = {fmt: get(api, path, alice_key, format=fmt)["ETag"] for fmt in ("json", "vtt", "srt", "txt")}
    assert len(set(tags.values())) == 4
    # a VTT tag does not revalidate the JSON answer, nor the other way round
    assert get(api, path, alice_key, etag=tags["vtt"]).status_code == 200
    assert get(api, path, alice_key, etag=tags["json"], format="vtt").status_code == 200
    # the same format chosen by Accept is the same answer, the same tag
    assert get(api, path, alice_key, etag=tags["vtt"], accept="text/vtt").status_code == 304
    assert get(api, path, alice_key, format="srt", maxCueChars="10")["ETag"] != tags["srt"]


def test_the_tag_computed_for_a_304_is_the_one_a_full_answer_carries(api, acme, alice_key):
    # The 304 check reads counts, not segments: both ways must agree, for every revision shape.
    session = factories.session(acme, committed=["a", "b", "c"], final=["A.", "B."])
    empty = factories.session(acme)
    for s in (session, empty):
        for path, params in paths(s)[1:6]:
            tag = get(api, path, alice_key, **params)["ETag"]
            assert get(api, path, alice_key, etag=tag, **params).status_code == 304


def test_an_append_changes_the_transcript_tags(api, meeting, alice_key):
    transcript_paths = [p for p in paths(meeting) if "/transcript" in p[0]]
    before = [get(api, path, alice_key, **params)["ETag"] for path, params in transcript_paths]
    services.append_committed_segments(session=meeting, segments=[seg("three", 5000)])
    for (path, params), tag in zip(transcript_paths, before):
        after = get(api, path, alice_key, etag=tag, **params)
        assert after.status_code == 200 and after["ETag"] != tag, (path, params)
        assert b"three" in after.content


def test_a_final_revision_changes_the_flat_tag(api, meeting, alice_key):
    path = f"/api/v1/sessions/{meeting.id}/transcript"
    tag = get(api, path, alice_key)["ETag"]
    services.change_session_status(session=meeting, status="completed")
    services.write_final_transcript(session=meeting, segments=[seg("Final.")])
    changed = get(api, path, alice_key, etag=tag)
    assert changed.status_code == 200 and changed.json()["transcript"][0]["text"] == "Final."


def test_a_session_change_changes_the_session_tag(api, meeting, alice_key):
    path = f"/api/v1/sessions/{meeting.id}"
    tag = get(api, path, alice_key)["ETag"]
    services.change_session_status(session=meeting, status="completed")
    changed = get(api, path, alice_key, etag=tag)
    assert changed.status_code == 200 and changed.json()["session"]["status"] == "completed"
    # a label edit through the admin (a plain save) changes it too
    tag = changed["ETag"]
    Session.objects.filter(pk=meeting.pk).update(label="Renamed")
    assert get(api, path, alice_key, etag=tag).status_code == 200


def test_a_new_board_version_changes_the_board_tags(api, meeting, alice_key):
    tags = {p: get(api, p, alice_key)["ETag"] for p, _ in paths(meeting)[-2:]}
    services.publish_board(session=meeting, board_id="summary", payload={"v": 2}, source_revision_kind="committed")
    for path, tag in tags.items():
        assert get(api, path, alice_key, etag=tag).status_code == 200, path


def test_another_workspace_gets_404_not_304(api, meeting, alice_key, bob_key):
    for path, params in paths(meeting):
        tag = get(api, path, alice_key, **params)["ETag"]
        response = get(api, path, bob_key, etag=tag, **params)
        assert response.status_code == 404 and "ETag" not in response, path


def test_no_credential_is_401_not_304(api, meeting, alice_key):
    path = f"/api/v1/sessions/{meeting.id}/transcript"
    tag = get(api, path, alice_key)["ETag"]
    response = api.client.get(path, headers={"If-None-Match": tag})
    assert response.status_code == 401


@override_settings(CONNECT_RATE_LIMIT_PER_CREDENTIAL=5, CONNECT_RATE_LIMIT_PER_WORKSPACE=0)
def test_a_304_is_not_charged_to_the_rate_limit(api, meeting, alice_key):
    # Counted in Redis when the suite runs with REDIS_URL (the PostgreSQL pass), else in the database.
    path = f"/api/v1/sessions/{meeting.id}/transcript"
    first = get(api, path, alice_key)
    assert first["RateLimit-Remaining"] == "4"
    for _ in range(20):
        poll = get(api, path, alice_key, etag=first["ETag"])
        assert poll.status_code == 304
        assert poll["RateLimit-Remaining"] == "4"  # the hit was given back
    # full answers still count, up to the limit
    statuses = [get(api, path, alice_key).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]
    # and a refused request is never a 304 (nor refunded)
    refused = get(api, path, alice_key, etag=first["ETag"])
    assert refused.status_code == 429


@pytest.fixture
def limit_of_100(settings):
    """A per-credential limit of 100 in a window that does not turn during the test."""
    from tests.servers import UNTURNING_WINDOW_SECONDS, forget_rate_limit_counts

    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 100
    settings.CONNECT_RATE_LIMIT_PER_WORKSPACE = 0
    settings.CONNECT_RATE_LIMIT_WINDOW_SECONDS = int(UNTURNING_WINDOW_SECONDS)
    yield 100
    forget_rate_limit_counts()


def test_if_none_match_star_is_answered_304_but_charged(api, meeting, alice_key, limit_of_100):
    """`*` names no tag the client was given, so it proves no earlier answer: a 304, counted."""
    path = f"/api/v1/sessions/{meeting.id}"
    answers = [get(api, path, alice_key, etag="*") for _ in range(400)]
    statuses = [a.status_code for a in answers]
    assert statuses == [304] * limit_of_100 + [429] * 300
    # The counter says what is left, one fewer each time, down to nothing.
    assert [int(a["RateLimit-Remaining"]) for a in answers[:limit_of_100]] == list(range(99, -1, -1))
    assert all(a["RateLimit-Remaining"] == "0" for a in answers[limit_of_100:])
    # A list that holds `*` beside a tag that is not ours is no better.
    assert get(api, path, alice_key, etag='"not-ours", *').status_code == 429


def test_a_tag_that_still_matches_stays_free_beside_star_polls(api, meeting, alice, limit_of_100):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    path = f"/api/v1/sessions/{meeting.id}"
    first = get(api, path, key)
    assert first["RateLimit-Remaining"] == "99"
    for _ in range(30):
        poll = get(api, path, key, etag=first["ETag"])
        assert poll.status_code == 304 and poll["RateLimit-Remaining"] == "99"
    assert get(api, path, key, etag="*")["RateLimit-Remaining"] == "98"  # star: charged
    assert get(api, path, key, etag=f'"stale", {first["ETag"]}')["RateLimit-Remaining"] == "98"  # names ours: free
