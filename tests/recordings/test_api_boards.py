"""docs/api/boards.md: the board list and the current board."""

from __future__ import annotations

import hashlib
import json

import pytest

from apps.recordings import services
from tests import factories

SUMMARY_FIELDS = {"id", "boardId", "version", "status", "isCurrent", "sourceRevisionKind", "createdAt"}


@pytest.fixture
def boarded(acme):
    session = factories.session(acme, committed=["x"], final=["x"])
    services.publish_board(session=session, board_id="summary", payload={"v": 1}, source_revision_kind="committed")
    services.publish_board(session=session, board_id="summary", payload={"v": 2}, source_revision_kind="final")
    services.publish_board(session=session, board_id="actions", payload={"items": ["ship"]}, source_revision_kind="final")
    return session


def test_list_has_every_version_newest_first_per_board_without_payload(api, boarded, alice_key):
    items = api.get(f"/api/v1/sessions/{boarded.id}/boards", alice_key).json()["items"]
    assert all(set(i) == SUMMARY_FIELDS for i in items)
    assert [(i["boardId"], i["version"], i["isCurrent"]) for i in items] == [
        ("actions", 1, True),
        ("summary", 2, True),
        ("summary", 1, False),
    ]


def test_get_returns_current_version_with_payload_and_hash(api, boarded, alice_key):
    board = api.get(f"/api/v1/sessions/{boarded.id}/boards/summary", alice_key).json()["board"]
    assert set(board) == SUMMARY_FIELDS | {"payload", "payloadHash"}
    assert board["version"] == 2 and board["isCurrent"] is True and board["payload"] == {"v": 2}
    assert board["sourceRevisionKind"] == "final" and board["status"] == "ready"


def test_payload_hash_is_sha256_of_canonical_json(api, acme, alice_key):
    session = factories.session(acme)
    payload = {"z": 1, "a": ["é", {"b": None}]}
    services.publish_board(session=session, board_id="s", payload=payload, source_revision_kind="committed")
    board = api.get(f"/api/v1/sessions/{session.id}/boards/s", alice_key).json()["board"]
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert board["payloadHash"] == "sha256:" + hashlib.sha256(canonical).hexdigest()


def test_unknown_board_is_not_found(api, boarded, alice_key):
    response = api.get(f"/api/v1/sessions/{boarded.id}/boards/nope", alice_key)
    assert response.status_code == 404 and response.json() == {"error": "not_found"}


@pytest.mark.parametrize("path", ["boards", "boards/summary"])
def test_unknown_session_is_not_found(api, alice_key, path):
    response = api.get(f"/api/v1/sessions/nope/{path}", alice_key)
    assert response.status_code == 404 and response.json() == {"error": "not_found"}


def test_session_without_boards_lists_nothing(api, acme, alice_key):
    session = factories.session(acme)
    assert api.get(f"/api/v1/sessions/{session.id}/boards", alice_key).json() == {"items": []}
