"""The stream hub in a test: a process has one hub (apps.stream.hub.get_hub), bound to the loop
that first asks for it. A test that runs its own loop gets a hub of its own and stops it (its
database threads, its timers) when the loop ends, so no hub outlives its loop or its test."""

from __future__ import annotations

import asyncio

import pytest

from apps.stream import hub as hub_module


def forget_hub() -> None:
    if hub_module._hub is not None:
        hub_module._hub.shutdown()
    hub_module._hub = None


def run_on_hub(coro):
    """asyncio.run(coro) with a hub made for that loop, stopped after it."""
    forget_hub()
    try:
        return asyncio.run(coro)
    finally:
        forget_hub()


@pytest.fixture
def own_hub():
    """For async tests on pytest-asyncio's loop: each test's hub lives and stops with it."""
    forget_hub()
    yield
    forget_hub()
