"""Overload sheds instead of queueing (engine/lanes.py): a request that finds no lane
free within CONNECT_QUEUE_TIMEOUT_SECONDS answers 503 unavailable with Retry-After at once, on
REST and /mcp alike (they share the process's lanes); health probes are never shed. The lane is
held by a switch the test flips, never by a clock."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import pytest

from engine.lanes import Lanes, Overloaded
from tests import factories
from tests.servers import serve, without_request_id
from tests.test_broken_connections import mcp_tools_list, wait_until


def test_a_request_that_finds_no_lane_free_within_the_bound_is_shed_and_a_probe_is_not():
    async def scenario():
        lanes = Lanes(1, queue_timeout=0.2)
        entered, release = asyncio.Event(), asyncio.Event()

        async def hold():
            entered.set()
            await release.wait()
            return "held"

        async def quick():
            return "quick"

        holder = asyncio.create_task(lanes.enter(hold))
        await entered.wait()
        with pytest.raises(Overloaded):
            await lanes.enter(quick)  # the lane stays held until after this: shed, whatever the load
        assert await lanes.enter_probe(quick) == "quick"
        release.set()
        assert await holder == "held"
        assert await lanes.enter(quick) == "quick"  # the lane is free again

    asyncio.run(scenario())


def test_waiting_requests_take_the_lane_in_arrival_order_and_a_client_that_leaves_frees_its_place():
    async def scenario():
        lanes = Lanes(1, queue_timeout=600)
        entered, release = asyncio.Event(), asyncio.Event()
        order: list[str] = []

        async def hold():
            entered.set()
            await release.wait()

        def named(name: str):
            async def run():
                order.append(name)
            return run

        holder = asyncio.create_task(lanes.enter(hold))
        await entered.wait()
        first = asyncio.create_task(lanes.enter(named("first")))
        gone = asyncio.create_task(lanes.enter(named("gone")))
        second = asyncio.create_task(lanes.enter(named("second")))
        await asyncio.sleep(0)  # all three are waiting
        gone.cancel()
        release.set()
        await asyncio.gather(holder, first, second)
        assert order == ["first", "second"]
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert lanes._free == [0] and not lanes._waiting  # nothing leaked

    asyncio.run(scenario())


def test_a_sync_call_runs_on_a_lane_in_the_callers_context_and_a_cancelled_caller_holds_the_lane_until_it_ends():
    import contextvars
    import threading

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker")

    async def scenario():
        lanes = Lanes(1, queue_timeout=600)
        marker.set("the caller's")
        seen = await lanes.run(lambda: (threading.current_thread().name, marker.get()))
        assert seen[0].startswith("lane-0") and seen[1] == "the caller's"

        started, finish = threading.Event(), threading.Event()

        def hold():
            started.set()
            assert finish.wait(600)
            return "held"

        caller = asyncio.create_task(lanes.run(hold))
        await asyncio.get_running_loop().run_in_executor(None, started.wait)
        caller.cancel()
        await asyncio.sleep(0.05)
        assert not lanes._free  # the sync code still runs: its lane is not handed out
        finish.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert lanes._free == [0] and not lanes._waiting

    asyncio.run(scenario())


@pytest.mark.e2e
def test_a_saturated_server_sheds_rest_and_mcp_with_503_and_keeps_answering_probes(tmp_path, transactional_db):
    alice = factories.member(factories.workspace("acme"), "alice@acme.test")
    key = factories.api_key(alice, factories.ALL_SCOPES)
    started, release = tmp_path / "started", tmp_path / "release"
    env = {"CONNECT_SYNC_THREADS": "1", "CONNECT_QUEUE_TIMEOUT_SECONDS": "0.2"}
    with serve(tmp_path, env=env) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        with ThreadPoolExecutor(max_workers=1) as pool:
            held = pool.submit(httpx.get, f"{server.url}/test/hold",
                               params={"started": str(started), "release": str(release)}, timeout=180)  # fmt: skip
            try:
                wait_until(started.exists, seconds=120, what="the request holding the only lane")

                shed = client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {key}"})
                assert shed.status_code == 503
                assert without_request_id(shed.json()) == {"error": "unavailable"}
                assert shed.headers["Retry-After"] == "1"
                assert shed.headers["content-type"] == "application/json"

                mcp = mcp_tools_list(client, key)
                assert mcp.status_code == 503
                assert without_request_id(orjson.loads(mcp.content)) == {"error": "unavailable"}
                assert mcp.headers["Retry-After"] == "1"

                assert client.get("/healthz").json() == {"status": "ok"}
                assert client.get("/readyz").status_code == 200
            finally:
                release.touch()
            assert held.result().json() == {"released": True}
        assert client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {key}"}).status_code == 200
        assert mcp_tools_list(client, key).status_code == 200
