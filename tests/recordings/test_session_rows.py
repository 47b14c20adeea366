"""The sessions list and session get read rows through SQL written once (selectors
`_SessionSql`), timestamps formatted by the database: the same answer as the representation of
the model instances, the same pages and filters as the ORM query they replaced, and a next-page
key exact to the microsecond (a whole second included, which SQLite stores without a fraction)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from apps.core.cursors import decode_cursor
from apps.core.errors import NotFound
from apps.core.timestamps import parse_iso
from apps.recordings import selectors, services
from apps.recordings.models import Session, SessionStatus
from apps.recordings.representations import session_repr, session_row_repr
from tests import factories

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def sessions(acme, globex):
    made = factories.sessions_at_distinct_times(acme, 7, start=START)
    # Two sessions in one microsecond (the id breaks the tie), one on a whole second, one with
    # its optional fields empty, and one of another workspace at the same instant.
    Session.objects.filter(pk__in=[made[2].pk, made[3].pk]).update(created_at=START + timedelta(microseconds=123456))
    Session.objects.filter(pk=made[4].pk).update(created_at=START + timedelta(seconds=30))
    empty = services.create_session(workspace=acme, label=None, memo=None)
    Session.objects.filter(pk=empty.pk).update(created_at=START + timedelta(seconds=40, microseconds=999999))
    services.change_session_status(session=Session.objects.get(pk=made[5].pk), status=SessionStatus.COMPLETED)
    other = factories.sessions_at_distinct_times(globex, 1, start=START)[0]
    return acme, other


def orm_order(workspace):
    return list(Session.objects.filter(workspace=workspace).order_by("-created_at", "-id"))


def test_every_row_is_encoded_as_the_model_instance_was(sessions):
    workspace, _ = sessions
    page, cursor = selectors.sessions_page(workspace=workspace, limit=100)
    expected = orm_order(workspace)
    assert cursor is None
    assert [session_row_repr(row) for row in page] == [session_repr(s) for s in expected]
    for session in expected:
        row = selectors.session_row(workspace=workspace, session_id=session.id)
        assert session_row_repr(row) == session_repr(session)


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_paging_visits_every_session_once_in_the_orm_order(sessions, limit):
    workspace, other = sessions
    seen, cursor = [], None
    while True:
        page, cursor = selectors.sessions_page(workspace=workspace, limit=limit, cursor=cursor)
        seen += [row.id for row in page]
        if cursor is None:
            break
    assert seen == [s.id for s in orm_order(workspace)] and other.id not in seen


def test_the_next_key_is_exact_to_the_microsecond(sessions):
    workspace, _ = sessions
    ordered = orm_order(workspace)
    for limit in range(1, len(ordered)):
        _, cursor = selectors.sessions_page(workspace=workspace, limit=limit)
        filters = {"status": None, "createdAfter": None, "createdBefore": None}
        key = decode_cursor("sessions", workspace.id, cursor, filters)
        assert parse_iso(key[0]) == ordered[limit - 1].created_at and key[1] == ordered[limit - 1].id


def test_filters_match_the_orm(sessions):
    workspace, _ = sessions
    ordered = orm_order(workspace)
    after, before = START + timedelta(microseconds=123456), START + timedelta(seconds=30)
    page, _ = selectors.sessions_page(workspace=workspace, limit=100, created_after=after, created_before=before)
    # Both bounds are exclusive, to the millisecond the wire shows.
    floor_after = after.replace(microsecond=after.microsecond // 1000 * 1000) + timedelta(milliseconds=1)
    assert [r.id for r in page] == [s.id for s in ordered if floor_after <= s.created_at < before]
    statuses = [SessionStatus.COMPLETED]
    assert any(s.status == SessionStatus.COMPLETED for s in ordered)
    page, _ = selectors.sessions_page(workspace=workspace, limit=100, statuses=statuses)
    assert [r.id for r in page] == [s.id for s in ordered if s.status in statuses]
    page, _ = selectors.sessions_page(workspace=workspace, limit=100, statuses=["no-such-status"])
    assert page == []


def test_a_session_of_another_workspace_is_not_found(sessions):
    workspace, other = sessions
    with pytest.raises(NotFound):
        selectors.session_row(workspace=workspace, session_id=other.id)


# --- Admission reads who, the door reads what --------------------------------------------------


def session_statements(queries) -> list[str]:
    """The captured statements that read a session; none of them is the API key's lookup."""
    from apps.tenancy.models import ApiKey

    reads = [q["sql"] for q in queries if Session._meta.db_table in q["sql"]]
    assert not [sql for sql in reads if ApiKey._meta.db_table in sql]
    return reads


def test_rest_and_mcp_answer_a_session_get_each_reading_the_session_itself(sessions):
    import orjson
    from django.test import Client

    from apps.mcp import consumer

    workspace, other = sessions
    key = factories.api_key(factories.member(workspace, "reader@acme.test"), factories.ALL_SCOPES)
    ids = [*Session.objects.filter(workspace=workspace).values_list("id", flat=True), other.id, "no-such-session"]
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json", "MCP-Protocol-Version": "2025-06-18"}

    def answers():
        client, out = Client(), []
        for session_id in ids:
            rest = client.get(f"/api/v1/sessions/{session_id}", headers=headers)
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "get_session", "arguments": {"sessionId": session_id}}}
            mcp_headers = {name.lower(): value for name, value in headers.items()} | {"content-type": "application/json"}
            reply, extra = consumer.answer(mcp_headers, orjson.dumps(body), set())
            out.append((rest.status_code, rest.content, rest.get("ETag"), reply.status, orjson.dumps(reply.body)))
        return out

    def statements() -> tuple[list[str], list[str]]:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        client, body = Client(), {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "get_session", "arguments": {"sessionId": ids[0]}}}
        mcp_headers = {name.lower(): value for name, value in headers.items()} | {"content-type": "application/json"}
        with CaptureQueriesContext(connection) as rest:
            client.get(f"/api/v1/sessions/{ids[0]}", headers=headers)
        with CaptureQueriesContext(connection) as mcp:
            consumer.answer(mcp_headers, orjson.dumps(body), set())
        return session_statements(rest.captured_queries), session_statements(mcp.captured_queries)

    answered = answers()
    assert answered == answers()
    # Each door reads its session in a statement of its own, the selector's, after admission.
    rest_reads, mcp_reads = statements()
    assert len(rest_reads) == len(mcp_reads) == 1 and rest_reads == mcp_reads
    assert [status for status, *_ in answered] == [200] * (len(ids) - 2) + [404, 404]
    assert [answer[3] for answer in answered] == [200] * len(ids)  # MCP: a tool error for the missing
    assert b'"isError":true' in answered[-1][4] and b'"isError":false' in answered[0][4]
