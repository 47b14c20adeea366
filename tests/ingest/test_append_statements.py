"""What an append costs the database, pinned: the idempotency claim is one INSERT that commits on
its own (no transaction around it), the session is found by the hand-written statement that locks
it (no read of its own; docs/decisions/mechanisms.md), the work's transaction holds no savepoint,
and the answer stored is the answer sent.
And the answers stay the ingest API's: an unknown session is 404 whatever the body, a bad body on
a known one 400, a gap 409."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.ingest import idempotency
from apps.ingest.models import IdempotencyKey
from apps.recordings.models import Session
from tests.ingest.conftest import PREFIX, batch

# Real autocommit, as in production: a test transaction would wrap every statement in savepoints.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rec(ingest, acme_ingest_key):
    assert ingest.put("rec-1", {"label": "Standup"}, acme_ingest_key).status_code == 201
    assert ingest.post("rec-1/segments", batch(0, 2), acme_ingest_key).status_code == 200
    return Session.objects.get(external_id="rec-1")


def statements(ingest, key: str, body: dict, idempotency_key: str) -> tuple[object, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        answer = ingest.post("rec-1/segments", body, key, **{"Idempotency-Key": idempotency_key})
    return answer, [q["sql"] for q in captured.captured_queries]


def test_an_append_claims_its_key_in_one_statement_and_reads_the_session_only_to_lock_it(
    ingest, acme_ingest_key, rec
):
    answer, sql = statements(ingest, acme_ingest_key, batch(2, 3), "pin-1")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"sessionId": rec.id, "appended": 3, "acknowledged": 0, "nextSequence": 5}
    keys = [i for i, s in enumerate(sql) if "ingest_idempotencykey" in s]
    claim, answered = keys
    assert sql[claim].startswith("INSERT") and sql[answered].startswith("UPDATE")
    # Nothing opens a transaction before the claim, and the claim is not inside one; the work's
    # transaction has no savepoint inside it.
    assert not any(s.upper().startswith(("BEGIN", "SAVEPOINT")) for s in sql[: claim + 1])
    assert not any(s.upper().startswith(("SAVEPOINT", "RELEASE SAVEPOINT")) for s in sql), sql
    reads = [s for s in sql if "recordings_session" in s]
    assert len(reads) == 1 and "external_id" in reads[0], reads
    if connection.features.has_select_for_update_of:
        assert "FOR UPDATE" in reads[0]


def test_the_claim_stores_the_answer_sent_and_answers_a_repeat_from_it(ingest, acme_ingest_key, rec):
    body = batch(2, 1)
    answer = ingest.post("rec-1/segments", body, acme_ingest_key, **{"Idempotency-Key": "pin-2"})
    assert answer.status_code == 200
    row = IdempotencyKey.objects.get(key="pin-2")
    assert row.workspace_id == rec.workspace_id
    assert row.fingerprint == idempotency.fingerprint("POST", PREFIX + "rec-1/segments", json.dumps(body).encode())
    assert row.status == 200 and bytes(row.body) == answer.content
    assert row.created_at.tzinfo is not None and row.created_at <= row.answered_at
    again = ingest.post("rec-1/segments", body, acme_ingest_key, **{"Idempotency-Key": "pin-2"})
    assert again.content == answer.content and again[idempotency.REPLAYED] == "true"
    other = ingest.post("rec-1/segments", batch(3, 1), acme_ingest_key, **{"Idempotency-Key": "pin-2"})
    assert other.status_code == 422


def test_an_unknown_session_is_404_whatever_the_body_and_a_bad_body_on_a_known_one_400(
    ingest, acme_ingest_key, globex_ingest_key, rec
):
    for body in (batch(0, 1), {"segments": "nope"}, {"unknown": 1}):
        refused = ingest.post("no-such-recorder/segments", body, acme_ingest_key)
        assert refused.status_code == 404, (body, refused.content)
        assert ingest.post("rec-1/segments", body, globex_ingest_key).status_code == 404  # another workspace's
    bad = ingest.post("rec-1/segments", {"segments": "nope"}, acme_ingest_key)
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_request"
    gap = ingest.post("rec-1/segments", batch(9, 1), acme_ingest_key)
    assert gap.status_code == 409 and gap.json()["expectedSequence"] == 2
