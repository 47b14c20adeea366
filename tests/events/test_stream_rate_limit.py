"""Opening a stream counts against REST's rate limits (per credential and per workspace), so a
client that reconnects in a tight loop is refused with 429 rate_limited, not served forever."""

from __future__ import annotations

import httpx
import pytest

from apps.stream import slots
from tests.events.live import STREAM, Reader, start_server
from tests.servers import UNTURNING_WINDOW_SECONDS, forget_rate_limit_counts, without_request_id

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 3


@pytest.fixture(scope="module")
def limited(django_db_setup, django_db_blocker, tmp_path_factory):
    server = start_server(
        tmp_path_factory.mktemp("events-rate"),
        CONNECT_RATE_LIMIT_PER_CREDENTIAL=str(LIMIT),
        CONNECT_RATE_LIMIT_WINDOW_SECONDS=UNTURNING_WINDOW_SECONDS,
    )
    yield server
    server.stop()
    forget_rate_limit_counts()


@pytest.fixture
def streams():
    opened: list[Reader] = []
    yield lambda server, key: opened.append(Reader(server.url, key)) or opened[-1]
    for reader in opened:
        reader.close()


def _open(server, key: str) -> httpx.Response:
    """Open a stream, keep only its status and headers, and leave."""
    with httpx.stream("GET", server.url + STREAM, headers={"Authorization": f"Bearer {key}"}, timeout=10) as r:
        if r.status_code != 200:
            r.read()
        return r


def test_stream_opens_are_counted_and_refused_past_the_limit(limited, streams, acme, alice_key):
    # Three streams stay open (the servers' stream limit is 3 too): the fourth open is refused
    # by the rate limit, which is checked first, and takes no slot.
    opened = [streams(limited, alice_key) for _ in range(LIMIT)]
    assert [r.status for r in opened] == [200] * LIMIT
    assert sorted(r.headers["ratelimit-remaining"] for r in opened) == [str(n) for n in range(LIMIT)]
    assert all(r.headers["ratelimit-limit"] == str(LIMIT) for r in opened)

    refused = _open(limited, alice_key)
    assert refused.status_code == 429 and without_request_id(refused.json()) == {"error": "rate_limited"}
    assert refused.headers["content-type"] == "application/json"
    assert int(refused.headers["Retry-After"]) >= 1 and refused.headers["RateLimit-Remaining"] == "0"
    assert slots.open_slots(workspace_id=acme.id) == LIMIT


def test_another_credential_has_its_own_budget(limited, acme, alice, bob_key):
    from tests import factories

    other = factories.api_key(alice)
    for _ in range(LIMIT):
        _open(limited, other)
    assert _open(limited, other).status_code == 429
    assert _open(limited, bob_key).status_code == 200
