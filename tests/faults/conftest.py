"""The fault suite's rig: one Redis and one `serve --workers 2` (with the task cluster) for the
module, shared by its cases; each case makes its own workspace, streams and endpoints, and
uses `transactional_db` (the servers are other processes: what the case writes is committed,
and emptied after it)."""

from __future__ import annotations

import pytest

from tests.faults.harness import RedisServer, Stack


@pytest.fixture(scope="module")
def stack(django_db_setup, django_db_blocker, tmp_path_factory):
    logs = tmp_path_factory.mktemp("faults")
    redis = RedisServer(logs)
    try:
        stack = Stack(logs, redis)
        yield stack
        stack.stop()
    finally:
        redis.stop()


@pytest.fixture
def rig(stack, transactional_db):
    return stack
