"""Ingest fixtures: each workspace's ingest key, and a client that speaks the ingest API through
Django's test client (`ingest.put(path, body, key)`); the live tests start `serve`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from apps.tenancy import services as tenancy

PREFIX = "/api/v1/ingest/sessions/"


@dataclass
class Ingest:
    client: Client

    def send(self, method: str, path: str, body: Any, key: str | None, *, raw: bytes | None = None,
             content_type: str = "application/json", **headers: str):
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        data = raw if raw is not None else json.dumps(body)
        call = getattr(self.client, method.lower())
        return call(PREFIX + path, data=data, content_type=content_type, headers=headers)

    def put(self, path: str, body: Any, key: str | None, **kwargs):
        return self.send("PUT", path, body, key, **kwargs)

    def post(self, path: str, body: Any, key: str | None, **kwargs):
        return self.send("POST", path, body, key, **kwargs)


@pytest.fixture
def ingest() -> Ingest:
    return Ingest(Client())


@pytest.fixture
def acme_ingest_key(alice) -> str:
    return tenancy.issue_ingest_key(membership=alice, name="recorder").key


@pytest.fixture
def globex_ingest_key(bob) -> str:
    return tenancy.issue_ingest_key(membership=bob, name="recorder").key


def segment(sequence: int, text: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "sequence": sequence,
        "timestampStart": sequence * 1000,
        "timestampEnd": sequence * 1000 + 900,
        "speakerLabel": "Speaker 1",
        "text": text if text is not None else f"segment number {sequence}",
        "confidence": 0.9,
        **fields,
    }


def batch(first: int, count: int, **fields: Any) -> dict[str, Any]:
    return {"segments": [segment(first + i, **fields) for i in range(count)]}
