"""The recordings back office is for browsing: staff only, read-only, and cheap on big tables."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.core.admin import CappedCountPaginator
from apps.recordings import services as recordings
from apps.recordings.models import BoardContent, Segment, Session, Transcript
from apps.tenancy import services as tenancy
from tests import factories

pytestmark = pytest.mark.django_db

RECORDINGS_MODELS = [Session, Transcript, Segment, BoardContent]


@pytest.fixture
def staff(acme) -> Client:
    membership = tenancy.add_member(workspace=acme, email="root@acme.test", staff=True)
    client = Client()
    client.force_login(membership.user)
    return client


@pytest.fixture
def meeting(acme) -> Session:
    s = factories.session(
        acme,
        label="Atlas roadmap review",
        committed=["um we should ship the beacon", "the kestrel budget is blocked"],
        final=["We should ship the beacon.", "The kestrel budget is blocked."],
    )
    recordings.publish_board(
        session=s, board_id="summary", payload={"overview": "v1"}, source_revision_kind="committed"
    )
    recordings.publish_board(
        session=s, board_id="summary", payload={"overview": "Ship the Beacon"}, source_revision_kind="final"
    )
    return s


def url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_recordings_models_are_registered():
    assert all(admin.site.is_registered(m) for m in RECORDINGS_MODELS)


def test_changelists_and_change_views_render_for_staff(staff, meeting):
    for model in RECORDINGS_MODELS:
        assert staff.get(url(model, "changelist")).status_code == 200, model
        objs = list(model.objects.all())
        assert objs, model
        for obj in objs:
            assert staff.get(url(model, "change", obj.pk)).status_code == 200, (model, obj)


def test_non_staff_and_anonymous_are_sent_to_login(alice, meeting):
    member = Client()
    member.force_login(alice.user)
    for client in (member, Client()):
        for path in (url(Session, "changelist"), url(Session, "change", meeting.pk), url(Segment, "changelist")):
            response = client.get(path)
            assert response.status_code == 302
            assert response["Location"].startswith("/admin/login/")


def test_recordings_are_read_only(staff, meeting):
    segment = Segment.objects.first()
    for model, obj in [(Session, meeting), (Segment, segment), (BoardContent, BoardContent.objects.first())]:
        assert staff.get(url(model, "add")).status_code == 403
        assert staff.get(url(model, "delete", obj.pk)).status_code == 403
        assert staff.post(url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
        page = staff.get(url(model, "change", obj.pk)).content.decode()
        assert 'name="_save"' not in page
        assert url(model, "add") not in staff.get(url(model, "changelist")).content.decode()
    staff.post(url(Session, "change", meeting.pk), {"label": "Hacked", "status": "failed"})
    staff.post(url(Segment, "change", segment.pk), {"text": "hacked"})
    meeting.refresh_from_db()
    segment.refresh_from_db()
    assert (meeting.label, meeting.status) == ("Atlas roadmap review", "completed")
    assert segment.text != "hacked"
    assert "delete_selected" not in staff.get(url(Session, "changelist")).content.decode()


def test_session_page_links_its_transcripts_and_boards(staff, meeting):
    body = staff.get(url(Session, "change", meeting.pk)).content.decode()
    for transcript in meeting.transcripts.all():
        assert f"?transcript={transcript.pk}" in body
    assert "2 segments" in body
    for board in meeting.boards.all():
        assert url(BoardContent, "change", board.pk) in body


def test_segments_of_one_transcript(staff, meeting, acme):
    factories.session(acme, label="Other", committed=["unrelated chatter"])
    final = meeting.transcripts.get(revision_kind="final")
    response = staff.get(url(Segment, "changelist"), {"transcript": final.pk})
    assert response.status_code == 200
    body = response.content.decode()
    assert "We should ship the beacon." in body and "The kestrel budget is blocked." in body
    assert "um we should ship" not in body and "unrelated chatter" not in body


def test_board_page_shows_the_payload(staff, meeting):
    board = meeting.boards.get(is_current=True)
    body = staff.get(url(BoardContent, "change", board.pk)).content.decode()
    assert "Ship the Beacon" in body and board.payload_hash in body


def test_segment_changelist_never_counts_past_the_cap(staff, acme, monkeypatch):
    monkeypatch.setattr(CappedCountPaginator, "CAP", 5)
    factories.session(acme, committed=[f"line {i}" for i in range(12)])
    response = staff.get(url(Segment, "changelist"))
    assert response.status_code == 200
    assert response.context["cl"].result_count == 5
    assert response.context["cl"].full_result_count is None


@pytest.mark.parametrize("model", [Session, Transcript, Segment, BoardContent])
def test_changelist_queries_do_not_grow_with_rows(staff, acme, model):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert staff.get(url(model, "changelist")).status_code == 200
        return len(ctx.captured_queries)

    def add_sessions(n: int) -> None:
        for i in range(n):
            s = factories.session(acme, label=f"S{i}", committed=["a", "b"], final=["A"])
            recordings.publish_board(session=s, board_id="summary", payload={"i": i}, source_revision_kind="final")

    add_sessions(2)
    few = queries()
    add_sessions(8)
    assert queries() == few
