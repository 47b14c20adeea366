"""Fixtures shared by the live stream tests."""

from __future__ import annotations

import pytest

from tests.events.live import Reader


@pytest.fixture
def readers():
    """`readers(server, key, **kwargs)` opens a real SSE reader; every one is closed afterwards."""
    opened: list[Reader] = []

    def open_reader(server, key, **kwargs) -> Reader:
        reader = Reader(server.url, key, **kwargs)
        opened.append(reader)
        return reader

    yield open_reader
    for reader in opened:
        reader.close()
