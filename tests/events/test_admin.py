"""The event outbox in the back office: staff browse it, newest first, filter and search it;
nobody adds, edits or deletes an event there; its list stays cheap as the outbox grows."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.events.models import Event
from apps.recordings import services as recordings
from apps.tenancy import services as tenancy
from tests import factories

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:events_event_changelist"


@pytest.fixture
def staff(acme) -> Client:
    membership = tenancy.add_member(workspace=acme, email="root@acme.test", staff=True)
    client = Client()
    client.force_login(membership.user)
    return client


def change_url(event: Event) -> str:
    return reverse("admin:events_event_change", args=[event.pk])


def listed(response) -> list[str]:
    return [event.id for event in response.context["cl"].result_list]


def test_staff_list_newest_first_and_view_an_event(staff, acme):
    session = factories.session(acme, label="Kickoff", committed=["hello there"])
    recordings.change_session_status(session=session, status="completed")
    response = staff.get(reverse(CHANGELIST))
    assert response.status_code == 200
    newest_first = list(Event.objects.order_by("-occurred_at", "-id").values_list("id", flat=True))
    assert len(newest_first) == 3 and listed(response) == newest_first
    assert response.context["cl"].full_result_count is None  # never counts the whole outbox
    segment = Event.objects.get(type="transcript.segment.created")
    page = staff.get(change_url(segment))
    assert page.status_code == 200
    body = page.content.decode()
    assert segment.id in body and session.id in body and "hello there" in body
    assert 'name="_save"' not in body


def test_filter_by_type_and_workspace_and_search_by_session(staff, acme, globex):
    ours = factories.session(acme, committed=["a", "b"])
    theirs = factories.session(globex)
    everything = staff.get(reverse(CHANGELIST))
    assert len(listed(everything)) == 4
    segments = staff.get(reverse(CHANGELIST), {"type__exact": "transcript.segment.created"})
    assert set(listed(segments)) == set(
        Event.objects.filter(type="transcript.segment.created").values_list("id", flat=True)
    )
    assert len(listed(segments)) == 2
    globex_only = staff.get(reverse(CHANGELIST), {"workspace__id__exact": globex.pk})
    assert listed(globex_only) == [Event.objects.get(session_id=theirs.id).id]
    by_session = staff.get(reverse(CHANGELIST), {"q": ours.id})
    assert set(listed(by_session)) == set(Event.objects.filter(session_id=ours.id).values_list("id", flat=True))
    assert len(listed(by_session)) == 3
    assert listed(staff.get(reverse(CHANGELIST), {"q": ours.id[:-1]})) == []  # exact, not a substring scan


def test_nobody_adds_changes_or_deletes_events(staff, acme):
    session = factories.session(acme)
    event = Event.objects.get(session_id=session.id)
    before = (event.type, event.session_id, event.data)
    assert staff.get(reverse("admin:events_event_add")).status_code == 403
    assert staff.post(reverse("admin:events_event_add"), {"type": "session.created"}).status_code == 403
    staff.post(change_url(event), {"type": "session.status_changed", "session_id": "other", "data": "{}"})
    assert staff.get(reverse("admin:events_event_delete", args=[event.pk])).status_code == 403
    assert staff.post(reverse("admin:events_event_delete", args=[event.pk]), {"post": "yes"}).status_code == 403
    changelist = staff.get(reverse(CHANGELIST)).content.decode()
    assert "delete_selected" not in changelist and reverse("admin:events_event_add") not in changelist
    event.refresh_from_db()
    assert (event.type, event.session_id, event.data) == before
    assert Event.objects.count() == 1


def test_members_who_are_not_staff_are_sent_to_login(alice, acme):
    factories.session(acme)
    member = Client()
    member.force_login(alice.user)
    for client in (member, Client()):
        response = client.get(reverse(CHANGELIST))
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_changelist_queries_do_not_grow_with_rows(staff, acme, globex):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert staff.get(reverse(CHANGELIST)).status_code == 200
        return len(ctx.captured_queries)

    factories.session(acme, committed=["x"])
    few = queries()
    for workspace in (acme, globex) * 4:
        factories.session(workspace, committed=["y", "z"])
    assert queries() == few


def test_event_is_registered():
    assert admin.site.is_registered(Event)
