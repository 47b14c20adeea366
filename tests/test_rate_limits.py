"""Rate limits across server processes: two daphne processes behind one socket count into the
same buckets (the database on the embedded default, Redis when REDIS_URL is set)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests import factories
from tests.servers import UNTURNING_WINDOW_SECONDS, forget_rate_limit_counts, serve, without_request_id

pytestmark = [pytest.mark.e2e]

LIMIT = 12


@pytest.fixture(scope="module")
def limited_server(django_db_setup, django_db_blocker, tmp_path_factory):
    env = {
        "CONNECT_RATE_LIMIT_PER_CREDENTIAL": str(LIMIT),
        "CONNECT_RATE_LIMIT_PER_WORKSPACE": str(LIMIT * 3),
        "CONNECT_RATE_LIMIT_WINDOW_SECONDS": UNTURNING_WINDOW_SECONDS,
    }
    with serve(tmp_path_factory.mktemp("rate-limits"), workers=2, env=env) as server:
        yield server
    forget_rate_limit_counts()


def fresh_get(url: str, path: str, key: str | None = None) -> httpx.Response:
    # A new connection per request, so the kernel hands requests to either process.
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(url + path, headers=headers, timeout=10)


def test_one_credential_is_counted_once_across_processes(limited_server, transactional_db):
    alice = factories.member(factories.workspace("acme"), "alice@acme.test")
    key = factories.api_key(alice)
    with ThreadPoolExecutor(max_workers=6) as pool:
        processes: set = set()
        for _ in range(20):  # overlapping slow requests until both processes have answered
            hold = pool.map(lambda _: fresh_get(limited_server.url, "/test/thread?hold=0.2"), range(12))
            processes |= {r.json()["process"] for r in hold}
            if len(processes) == 2:
                break
        responses = list(pool.map(lambda _: fresh_get(limited_server.url, "/api/v1/sessions", key), range(LIMIT + 6)))
    assert len(processes) == 2, "both server processes should be serving"
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * LIMIT + [429] * 6
    # One counter: every allowed request saw a different remaining count, LIMIT-1 down to 0.
    remaining = sorted(int(r.headers["RateLimit-Remaining"]) for r in responses if r.status_code == 200)
    assert remaining == list(range(LIMIT))
    for refused in (r for r in responses if r.status_code == 429):
        assert without_request_id(refused.json()) == {"error": "rate_limited"}
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.headers["RateLimit-Remaining"] == "0"


def test_a_workspace_is_counted_across_its_credentials_and_processes(limited_server, transactional_db):
    globex = factories.workspace("globex")
    keys = [factories.api_key(factories.member(globex, f"m{i}@globex.test")) for i in range(4)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        # 4 credentials × 10 = 40 requests, each credential below its own limit of 12; the
        # workspace allows 36.
        responses = list(pool.map(lambda i: fresh_get(limited_server.url, "/api/v1/sessions", keys[i % 4]), range(40)))
    assert sorted(r.status_code for r in responses) == [200] * (LIMIT * 3) + [429] * 4
    assert fresh_get(limited_server.url, "/healthz").status_code == 200  # never limited


def test_a_burst_on_one_credential_admits_exactly_its_limit(limited_server, transactional_db):
    """300 requests at once over new connections (so either process takes each): exactly the
    credential's limit is admitted, on whichever store counts them."""
    initech = factories.workspace("initech")
    key = factories.api_key(factories.member(initech, "burst@initech.test"))
    with ThreadPoolExecutor(max_workers=32) as pool:
        responses = list(pool.map(lambda _: fresh_get(limited_server.url, "/api/v1/sessions", key), range(300)))
    assert sorted(r.status_code for r in responses) == [200] * LIMIT + [429] * (300 - LIMIT)
    remaining = sorted(int(r.headers["RateLimit-Remaining"]) for r in responses if r.status_code == 200)
    assert remaining == list(range(LIMIT))


def test_a_burst_across_a_workspace_admits_exactly_its_limit(limited_server, transactional_db):
    """300 requests at once from 30 credentials, each far below its own limit: exactly the
    workspace's limit is admitted."""
    umbrella = factories.workspace("umbrella")
    keys = [factories.api_key(factories.member(umbrella, f"m{i}@umbrella.test")) for i in range(30)]
    with ThreadPoolExecutor(max_workers=32) as pool:
        responses = list(
            pool.map(lambda i: fresh_get(limited_server.url, "/api/v1/sessions", keys[i % 30]), range(300))
        )
    assert sorted(r.status_code for r in responses) == [200] * (LIMIT * 3) + [429] * (300 - LIMIT * 3)
