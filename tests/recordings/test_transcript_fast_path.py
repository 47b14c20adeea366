"""The transcript fast path (issue 24 point 2): both REST paths and MCP get_transcript read
segments as rows and encode once, and answer what the model-instance representation rendered by
DRF answered before: the same bytes, or the same parsed JSON where only escaping may differ."""

from __future__ import annotations

import json

import pytest
from rest_framework.renderers import JSONRenderer

from apps.access.principal import Principal
from apps.mcp import tool_calls
from apps.recordings import services
from apps.recordings.models import RevisionKind, Segment, Transcript
from apps.recordings.representations import flat_segment_repr, transcript_revision_repr
from apps.recordings.services import SegmentInput
from tests import factories

TEXTS = ["Grüße aus Köln — «ça va?»", "日本語のテキスト", "plain ascii", "emoji 🎙️ and \"quotes\" \\ back"]


def _segments(texts, speakers):
    return [
        SegmentInput(timestamp_start=i * 1000, timestamp_end=i * 1000 + 900, text=t, speaker_label=speakers[i % len(speakers)],
                     confidence=[0.9, None, 0.123456789, 1.0][i % 4])
        for i, t in enumerate(texts)
    ]  # fmt: skip


@pytest.fixture
def rich(acme):
    session = services.create_session(workspace=acme, label="Fast path")
    services.append_committed_segments(session=session, segments=_segments(TEXTS * 3, ["Ana", None, ""]))
    return session


def old_flat_body(session) -> bytes:
    """What FlatTranscriptApi answered before the fast path: model instances, a dict each,
    DRF's JSONRenderer."""
    by_kind = {t.revision_kind: t for t in Transcript.objects.filter(session=session)}
    transcript = by_kind.get(RevisionKind.FINAL) or by_kind.get(RevisionKind.COMMITTED)
    segments = []
    if transcript:
        order = "session_committed_index" if transcript.revision_kind == RevisionKind.COMMITTED else "sequence"
        segments = Segment.objects.filter(transcript=transcript).order_by(order, "sequence")
    return JSONRenderer().render({"sessionId": session.id, "transcript": [flat_segment_repr(s) for s in segments]})


def old_revisions_body(session, kind=None) -> bytes:
    transcripts = Transcript.objects.filter(session=session).order_by("revision_kind")
    if kind:
        transcripts = transcripts.filter(revision_kind=kind)
    out = []
    for t in transcripts:
        order = "session_committed_index" if t.revision_kind == RevisionKind.COMMITTED else "sequence"
        out.append(transcript_revision_repr(t, list(Segment.objects.filter(transcript=t).order_by(order, "sequence"))))
    return JSONRenderer().render({"transcripts": out})


def test_flat_transcript_is_byte_for_byte_what_drf_rendered(api, rich, alice_key):
    response = api.get(f"/api/v1/sessions/{rich.id}/transcript", alice_key)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.content == old_flat_body(rich)


def test_final_revision_replaces_committed_on_the_fast_path(api, rich, alice_key):
    services.change_session_status(session=rich, status="completed")
    services.write_final_transcript(session=rich, segments=_segments(["Final one.", "Final two."], ["Bo"]))
    response = api.get(f"/api/v1/sessions/{rich.id}/transcript", alice_key)
    assert response.content == old_flat_body(rich)
    assert [s["text"] for s in response.json()["transcript"]] == ["Final one.", "Final two."]


@pytest.mark.parametrize("kind", [None, "committed", "final"])
def test_revisions_are_byte_for_byte_what_drf_rendered(api, rich, alice_key, kind):
    services.change_session_status(session=rich, status="completed")
    services.write_final_transcript(session=rich, segments=_segments(["Final one.", "Final two."], ["Bo", None]))
    params = {"revisionKind": kind} if kind else {}
    response = api.get(f"/api/v1/sessions/{rich.id}/transcripts", alice_key, **params)
    assert response.status_code == 200
    assert response.content == old_revisions_body(rich, kind)


def test_line_separators_parse_the_same(api, acme, alice_key):
    # DRF escapes U+2028/U+2029 (for JavaScript embedding); orjson writes them as UTF-8. Both
    # are valid JSON of the same value: the parsed bodies are equal.
    session = services.create_session(workspace=acme, label=None)
    services.append_committed_segments(session=session, segments=_segments(["a\u2028b\u2029c", "tab\there"], ["S"]))
    response = api.get(f"/api/v1/sessions/{session.id}/transcript", alice_key)
    assert json.loads(response.content) == json.loads(old_flat_body(session))


def test_empty_and_committed_only_sessions(api, acme, alice_key):
    empty = factories.session(acme)
    assert api.get(f"/api/v1/sessions/{empty.id}/transcript", alice_key).content == old_flat_body(empty)
    assert api.get(f"/api/v1/sessions/{empty.id}/transcripts", alice_key).content == old_revisions_body(empty)


def test_mcp_get_transcript_is_the_same_rows(rich, acme, alice):
    principal = Principal(workspace=acme, scopes=frozenset(factories.READ_SCOPES), kind="api_key",
                          credential_id="test", issuer=alice)  # fmt: skip
    result = tool_calls.get_transcript(principal, {"sessionId": rich.id})
    assert result["transcript"] == json.loads(old_flat_body(rich))["transcript"]
    assert result["totalSegments"] == len(TEXTS) * 3


def test_the_sql_written_once_reads_the_rows_the_orm_read(rich, acme):
    """selectors._TranscriptSql against the ORM queries it replaced: the same revisions and
    segments, in the same order, for a committed revision (commit order) and a final one."""
    from apps.recordings import selectors
    from apps.recordings.models import Session

    services.change_session_status(session=rich, status="completed")
    services.write_final_transcript(session=rich, segments=_segments(list(reversed(TEXTS)), ["Bo"]))
    session, revisions = selectors._session_and_transcripts(acme, rich.id, None)
    orm = list(
        Session.objects.filter(workspace=acme, id=rich.id).order_by("transcripts__revision_kind")
        .values_list("id", "label", *selectors.TRANSCRIPT_ROWS.through("transcripts__"))
    )  # fmt: skip
    assert [(session.id, session.label, *r) for r in revisions] == orm and len(orm) == 2
    assert session.updated_at == Session.objects.get(pk=rich.pk).updated_at.isoformat()
    for transcript in revisions:
        for rows in (selectors.FLAT_SEGMENT_ROWS, selectors.REVISION_SEGMENT_ROWS):
            order = "session_committed_index" if transcript.revision_kind == RevisionKind.COMMITTED else "sequence"
            expected = Segment.objects.filter(transcript_id=transcript.id).order_by(order, "sequence")
            read = selectors.segment_rows(transcript, rows)
            assert all(type(row) is tuple for row in read)
            assert _wire(read, rows) == list(map(rows.make, expected.values_list(*rows.columns)))


def _wire(read, rows):
    """Segment rows as read, timestamps in wire form (the encoder's `stamp`), named."""
    from apps.recordings import selectors

    stamp = selectors.segment_stamp() or (lambda value: value)
    at = [rows.index[f] for f in rows.stamps]
    return [rows.make(stamp(v) if i in at else v for i, v in enumerate(row)) for row in read]


# Floats whose shortest form is long or in exponent notation, whole numbers, both zeros, the
# extremes; orjson writes each the same from a tuple as from a dict.
AWKWARD = [0.1 + 0.2, 1 / 3, 1e-7, 2.5e-05, 5e-324, 1.7976931348623157e308, 1.0, 0.0, -0.0, 1e16, 123456789.125, None]


def previous_flat_body(session) -> bytes:
    """What the fast path answered before rows were tuples (its state at e877470): named rows
    from the ORM with the database's IsoMs timestamps, `encode_formatted`, orjson."""
    import orjson

    from apps.recordings import selectors, shapes

    by_kind = {t.revision_kind: t for t in Transcript.objects.filter(session=session)}
    transcript = by_kind.get(RevisionKind.FINAL) or by_kind.get(RevisionKind.COMMITTED)
    order = "session_committed_index" if transcript.revision_kind == RevisionKind.COMMITTED else "sequence"
    rows = selectors.FLAT_SEGMENT_ROWS
    named = map(rows.make, Segment.objects.filter(transcript=transcript).order_by(order, "sequence").values_list(*rows.columns))
    return orjson.dumps(shapes.FLAT_TRANSCRIPT.encode_formatted(session.id, list(named)))


def test_awkward_floats_and_whole_seconds_give_the_previous_bytes(api, acme, alice_key, alice):
    """Every confidence in AWKWARD and a segment stored at a whole second (SQLite stores no
    fraction then): the flat body is byte for byte the previous fast path's, and parses equal
    to what DRF rendered; the revisions body and MCP's page parse equal too."""
    from datetime import datetime, timezone

    session = services.create_session(workspace=acme, label="Awkward")
    texts = [f"t{i}" for i in range(len(AWKWARD))]
    segments = [SegmentInput(timestamp_start=i, timestamp_end=i + 1, text=t, speaker_label=None, confidence=c)
                for i, (t, c) in enumerate(zip(texts, AWKWARD))]  # fmt: skip
    services.append_committed_segments(session=session, segments=segments)
    first = Segment.objects.filter(transcript__session=session, sequence=0)
    first.update(created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    assert [s.confidence for s in Segment.objects.filter(transcript__session=session).order_by("sequence")] == AWKWARD
    body = api.get(f"/api/v1/sessions/{session.id}/transcript", alice_key).content
    assert body == previous_flat_body(session)
    assert json.loads(body) == json.loads(old_flat_body(session))
    assert json.loads(body)["transcript"][0]["createdAt"] == "2026-01-02T03:04:05.000Z"
    revisions = api.get(f"/api/v1/sessions/{session.id}/transcripts", alice_key).content
    assert json.loads(revisions) == json.loads(old_revisions_body(session))
    principal = Principal(workspace=acme, scopes=frozenset(factories.READ_SCOPES), kind="api_key",
                          credential_id="test", issuer=alice)  # fmt: skip
    result = tool_calls.get_transcript(principal, {"sessionId": session.id, "limit": 5})
    assert result["transcript"] == json.loads(old_flat_body(session))["transcript"][:5]


def test_mcp_pages_are_slices_of_the_same_rows(rich, acme, alice):
    principal = Principal(workspace=acme, scopes=frozenset(factories.READ_SCOPES), kind="api_key",
                          credential_id="test", issuer=alice)  # fmt: skip
    whole = json.loads(old_flat_body(rich))["transcript"]
    first = tool_calls.get_transcript(principal, {"sessionId": rich.id, "limit": 5})
    second = tool_calls.get_transcript(principal, {"sessionId": rich.id, "cursor": first["nextCursor"], "limit": 5})
    assert first["transcript"] + second["transcript"] == whole[:10]


@pytest.mark.parametrize("kind", [RevisionKind.COMMITTED, RevisionKind.FINAL])
def test_a_revision_is_read_in_an_index_order_without_a_sort(rich, kind):
    """The segment read's plan (selectors._TranscriptSql.segments) walks an index in the
    revision's order: no sort step (migration 0007 added the sequence to the committed
    order's index). On PostgreSQL with sequential scans and sorts priced out of reach, so the
    planner shows the order it can only get from the index."""
    from django.db import connection

    from apps.recordings import selectors

    services.change_session_status(session=rich, status="completed")
    services.write_final_transcript(session=rich, segments=_segments(["Final one.", "Final two."], ["Bo"]))
    transcript = Transcript.objects.get(session=rich, revision_kind=kind)
    sql = selectors._TRANSCRIPT_SQL.segments(selectors.FLAT_SEGMENT_ROWS, kind)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
            cursor.execute("EXPLAIN (FORMAT TEXT) " + sql, [transcript.id])
            plan = "\n".join(row[0] for row in cursor.fetchall())
            expected = "segment_commit_order" if kind == RevisionKind.COMMITTED else "segment_unique_sequence"
            assert "Sort" not in plan and f"Index Scan using {expected}" in plan, plan
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql.replace("%s", "?"), [transcript.id])
            plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
            expected = "segment_commit_order" if kind == RevisionKind.COMMITTED else "sqlite_autoindex"
            assert "TEMP B-TREE" not in plan and expected in plan, plan


def session_statements(queries) -> list[str]:
    """The captured statements that read a session; none of them is the API key's lookup."""
    from apps.recordings.models import Session
    from apps.tenancy.models import ApiKey

    reads = [q["sql"] for q in queries if Session._meta.db_table in q["sql"]]
    assert not [sql for sql in reads if ApiKey._meta.db_table in sql]
    return reads


def test_the_transcript_reads_its_session_itself_and_answers_the_same_bytes_and_tags(acme, rich):
    """Admission reads only the credential; the view reads the session and its revisions in a
    statement of its own. Both paths, every revision filter, JSON and an export, a conditional
    request, a session with no transcript, another workspace's session and a missing one: the
    same status, bytes and ETag every time, and one statement reading the session."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from apps.tenancy.models import Workspace

    services.change_session_status(session=rich, status="completed")
    services.write_final_transcript(session=rich, segments=_segments(["Final one.", "Final two."], ["Bo"]))
    committed_only = services.create_session(workspace=acme, label="Live")
    services.append_committed_segments(session=committed_only, segments=_segments(TEXTS, ["Ana"]))
    empty = factories.session(acme)
    elsewhere = factories.session(Workspace.objects.create(slug="elsewhere", name="Elsewhere"))
    key = factories.api_key(factories.member(acme, "reader@acme.test"), factories.ALL_SCOPES)
    headers = {"Authorization": f"Bearer {key}"}
    paths = [
        f"/api/v1/sessions/{s}/{p}"
        for s in (rich.id, committed_only.id, empty.id, elsewhere.id, "no-such-session")
        for p in ("transcript", "transcript?format=srt", "transcripts", "transcripts?revisionKind=final",
                  "transcripts?revisionKind=committed")
    ]  # fmt: skip

    def answers():
        client, out = Client(), []
        for path in paths:
            response = client.get(path, headers=headers)
            again = client.get(path, headers={**headers, "If-None-Match": response.get("ETag", '"x"')})
            out.append((path, response.status_code, response.content, response.get("ETag"), again.status_code))
        return out

    def statements() -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            Client().get(f"/api/v1/sessions/{rich.id}/transcript", headers=headers)
        return session_statements(queries.captured_queries)

    Client().get(f"/api/v1/sessions/{rich.id}/transcript", headers=headers)  # the key's last_used_at touch
    answered = answers()
    alone = answers()
    assert answered == alone
    assert len(statements()) == 1
    statuses = [(status, again) for _, status, _, _, again in answered]
    assert statuses == [(200, 304)] * 15 + [(404, 404)] * 10
    assert answered[0][2] == old_flat_body(rich)


def test_mcp_get_transcript_reads_its_session_itself_and_answers_the_same(acme, rich):
    """MCP `get_transcript` reads through REST's selector after admission: the same replies,
    whole and paged, for a session, another workspace's and a missing one, every time, and one
    statement reading the session."""
    import orjson
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.mcp import consumer
    from apps.tenancy.models import Workspace

    elsewhere = factories.session(Workspace.objects.create(slug="elsewhere", name="Elsewhere"))
    key = factories.api_key(factories.member(acme, "reader@acme.test"), factories.ALL_SCOPES)
    headers = {"authorization": f"Bearer {key}", "accept": "application/json", "content-type": "application/json",
               "mcp-protocol-version": "2025-06-18"}  # fmt: skip
    calls = [{"sessionId": s} for s in (rich.id, elsewhere.id, "no-such-session")] + [{"sessionId": rich.id, "limit": 5}]

    def body(arguments):
        return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "get_transcript", "arguments": arguments}})  # fmt: skip

    def answers():
        return [orjson.dumps(consumer.answer(headers, body(arguments), set())[0].body) for arguments in calls]

    def statements() -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            consumer.answer(headers, body(calls[0]), set())
        return session_statements(queries.captured_queries)

    consumer.answer(headers, body(calls[0]), set())  # the key's last_used_at touch
    answered = answers()
    assert answered == answers()
    assert len(statements()) == 1
    first = orjson.loads(answered[0])["result"]["structuredContent"]
    assert first["transcript"] == json.loads(old_flat_body(rich))["transcript"]
    assert [b'"isError":true' in reply for reply in answered] == [False, True, True, False]
