"""The rate-limit counter file beside a SQLite database, damaged while `serve --workers 2` counts
in it (truncated, deleted, replaced, filled with garbage): both server processes live on (the
same pids), every request is answered, the damage is logged once, and afterwards the two
processes still count into one store (a fresh credential is admitted exactly its limit)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests import factories
from tests.servers import UNTURNING_WINDOW_SECONDS, descendants, forget_rate_limit_counts, serve, wait_until

pytestmark = [pytest.mark.e2e]

LIMIT = 16
DAMAGE_LOG = "rate-limit counter file"


@pytest.fixture(scope="module")
def counting_server(django_db_setup, django_db_blocker, tmp_path_factory):
    if connection.vendor != "sqlite" or settings.REDIS_URL:
        pytest.skip("the counter file is the store of a SQLite database without Redis")
    env = {
        "CONNECT_RATE_LIMIT_PER_CREDENTIAL": str(LIMIT),
        "CONNECT_RATE_LIMIT_PER_WORKSPACE": "100000",
        "CONNECT_RATE_LIMIT_WINDOW_SECONDS": UNTURNING_WINDOW_SECONDS,
    }
    with serve(tmp_path_factory.mktemp("counter-damage"), workers=2, env=env) as server:
        yield server
    forget_rate_limit_counts()


def pinned_clients(url: str) -> dict[int, httpx.Client]:
    """One keep-alive client per server process (one connection each), keyed by its pid."""
    pins: dict[int, httpx.Client] = {}

    def both() -> bool:
        client = httpx.Client(base_url=url, timeout=20, limits=httpx.Limits(max_connections=1))
        pid = client.get("/test/thread").json()["process"]
        if pid in pins:
            client.close()
        else:
            pins[pid] = client
        return len(pins) == 2

    wait_until(both, what="a connection to each server process", timeout=60, every=0)
    return pins


def pid_of(client: httpx.Client) -> int:
    return client.get("/test/thread").json()["process"]


def truncate(path: str) -> None:
    os.truncate(path, 0)


def delete(path: str) -> None:
    os.unlink(path)


def replace(path: str) -> None:
    with open(f"{path}.other", "wb") as other:
        other.write(os.urandom(4096))
    os.replace(f"{path}.other", path)


def fill_with_garbage(path: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, os.urandom(os.fstat(fd).st_size), 0)
    finally:
        os.close(fd)


@pytest.mark.parametrize("damage", [truncate, delete, replace, fill_with_garbage])
def test_damage_while_serving_crashes_nothing_and_keeps_one_count(counting_server, transactional_db, damage):
    path = f"{settings.DATABASES['default']['NAME']}-ratelimit"
    workspace = factories.workspace(f"damage-{damage.__name__.replace('_', '-')}")
    busy_key = factories.api_key(factories.member(workspace, "busy@damage.test"))
    fresh_key = factories.api_key(factories.member(workspace, "fresh@damage.test"))
    pins = pinned_clients(counting_server.url)
    children = sorted(descendants(counting_server.process.pid))
    for client in pins.values():  # both processes have counted in the file before it is damaged
        assert client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {busy_key}"}).status_code == 200
    assert os.path.getsize(path) > 0
    log_before = counting_server.log.stat().st_size

    stop = threading.Event()
    answered: list[int] = []

    def keep_counting(client: httpx.Client) -> None:
        while not stop.is_set():
            answered.append(client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {busy_key}"}).status_code)

    threads = [threading.Thread(target=keep_counting, args=(client,)) for client in pins.values()]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(answered) >= 10, what="requests before the damage", timeout=60)
        damage(path)
        counted = len(answered)
        wait_until(lambda: len(answered) >= counted + 20, what="requests after the damage", timeout=60)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert set(answered) <= {200, 429}  # every request answered, none failed (past the limit: 429)

    # One count: a credential new since the damage, spread over both processes, gets its limit.
    clients = list(pins.values())
    headers = {"Authorization": f"Bearer {fresh_key}"}
    with ThreadPoolExecutor(max_workers=2) as pool:  # one thread per connection, both at once
        runs = pool.map(lambda client: [client.get("/api/v1/sessions", headers=headers).status_code
                                        for _ in range(LIMIT * 3 // 2)], clients)
        statuses = [status for run in runs for status in run]
    assert sorted(statuses) == [200] * LIMIT + [429] * (LIMIT * 2)

    # The same processes answer, over the same connections: none died (SIGBUS) and was replaced.
    assert {pid: pid_of(client) for pid, client in pins.items()} == {pid: pid for pid in pins}
    assert sorted(descendants(counting_server.process.pid)) == children
    assert os.path.getsize(path) > 4096  # healed
    with counting_server.log.open() as log:
        log.seek(log_before)
        written = log.read()
    assert len([line for line in written.splitlines() if DAMAGE_LOG in line]) == 1, written[-3000:]
    for client in clients:
        client.close()
