"""`Idempotency-Key`, Stripe's rules: the same key and body answer the first response again
(status, body, `Idempotent-Replayed: true`) without running again; another body is 422; a
request still in flight is 409; keys belong to their credential and live 24 hours; a 5xx is
not kept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.events.models import Event
from apps.ingest import idempotency
from apps.ingest.models import IdempotencyKey
from apps.recordings import services
from apps.recordings.models import BoardContent, Session
from apps.tenancy import services as tenancy
from tests.ingest.conftest import batch

pytestmark = pytest.mark.django_db

BOARD = {"status": "ready", "sourceRevisionKind": "final", "payload": {"n": 1}}


def key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


@pytest.fixture
def rec(ingest, acme_ingest_key):
    ingest.put("rec-1", {}, acme_ingest_key)
    return Session.objects.get(external_id="rec-1")


def test_the_same_key_and_body_answer_the_first_response_without_running_again(ingest, acme_ingest_key, rec):
    first = ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key, **key("k-1"))
    # Meanwhile another version was published: a replay still answers what the first call did.
    ingest.put("rec-1/boards/summary", {**BOARD, "payload": {"n": 2}}, acme_ingest_key)
    again = ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key, **key("k-1"))
    assert (again.status_code, again.content) == (first.status_code, first.content) == (201, first.content)
    assert again["Idempotent-Replayed"] == "true"
    assert BoardContent.objects.count() == 2


def test_the_same_key_in_another_json_spelling_is_the_same_request(ingest, acme_ingest_key, rec):
    ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key, **key("k-1"))
    respelled = b'{ "payload": {"n": 1}, "sourceRevisionKind": "final", "status": "ready" }'
    again = ingest.put("rec-1/boards/summary", None, acme_ingest_key, raw=respelled, **key("k-1"))
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize("method, path, body", [
    ("PUT", "rec-1/boards/summary", {**BOARD, "payload": {"n": 2}}),
    ("PUT", "rec-1/boards/other", BOARD),
    ("POST", "rec-1/segments", batch(0, 1)),
])
def test_the_same_key_with_another_request_is_422(ingest, acme_ingest_key, rec, method, path, body):
    ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key, **key("k-1"))
    response = ingest.send(method, path, body, acme_ingest_key, **key("k-1"))
    assert response.status_code == 422
    assert response.json()["error"] == "idempotency_key_reused" and "Idempotency-Key" in response.json()["detail"]
    assert BoardContent.objects.count() == 1


def test_a_request_still_in_flight_is_409(ingest, acme_ingest_key, rec):
    from apps.tenancy.models import ApiKey, hash_api_key

    credential = ApiKey.objects.get(key_hash=hash_api_key(acme_ingest_key))
    body = batch(0, 1)
    path = "/api/v1/ingest/sessions/rec-1/segments"
    import json

    IdempotencyKey.objects.create(
        workspace_id=rec.workspace_id, credential_id=credential.pk, key="k-1", created_at=timezone.now(),
        fingerprint=idempotency.fingerprint("POST", path, json.dumps(body).encode()),
    )
    response = ingest.post("rec-1/segments", body, acme_ingest_key, **key("k-1"))
    assert response.status_code == 409 and response.json()["error"] == "conflict"
    assert "in progress" in response.json()["detail"]
    # A claim whose request died long ago is taken over.
    IdempotencyKey.objects.update(created_at=timezone.now() - idempotency.STALE_AFTER - timedelta(seconds=1))
    assert ingest.post("rec-1/segments", body, acme_ingest_key, **key("k-1")).status_code == 200


def test_keys_belong_to_their_credential(ingest, alice, acme_ingest_key, rec):
    other = tenancy.issue_ingest_key(membership=alice, name="second recorder").key
    ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key, **key("shared"))
    response = ingest.put("rec-1/boards/summary", {**BOARD, "payload": {"n": 2}}, other, **key("shared"))
    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    assert BoardContent.objects.count() == 2


def test_keys_expire_after_24_hours_and_are_purged(ingest, acme_ingest_key, rec):
    ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key, **key("k-1"))
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    again = ingest.put("rec-1/boards/summary", {**BOARD, "payload": {"n": 2}}, acme_ingest_key, **key("k-1"))
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert idempotency.purge_expired() == 1 and not IdempotencyKey.objects.exists()


def test_a_refusal_is_kept_like_any_answer(ingest, acme_ingest_key, rec):
    gap = ingest.post("rec-1/segments", batch(3, 1), acme_ingest_key, **key("k-1"))
    assert gap.status_code == 409
    ingest.post("rec-1/segments", batch(0, 3), acme_ingest_key)
    again = ingest.post("rec-1/segments", batch(3, 1), acme_ingest_key, **key("k-1"))
    assert (again.status_code, again.content) == (409, gap.content) and again["Idempotent-Replayed"] == "true"


def test_a_server_error_is_not_kept_so_a_retry_runs_again(ingest, acme_ingest_key, rec, monkeypatch):
    real = services.put_board

    def broken(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(services, "put_board", broken)
    failed = ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key, **key("k-1"))
    assert failed.status_code == 500 and not IdempotencyKey.objects.exists()
    monkeypatch.setattr(services, "put_board", real)
    retry = ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key, **key("k-1"))
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry


def test_the_work_and_its_answer_commit_together(ingest, acme_ingest_key, rec, monkeypatch):
    """A failure after the write but before the answer is stored undoes the write too: a retry
    never finds the write done and its answer missing."""

    def lost(claimed, status, body):
        raise RuntimeError("crashed before the answer was stored")

    monkeypatch.setattr(idempotency, "store", lost)
    assert ingest.post("rec-1/segments", batch(0, 2), acme_ingest_key, **key("k-1")).status_code == 500
    assert not Event.objects.filter(type="transcript.segment.created").exists()
