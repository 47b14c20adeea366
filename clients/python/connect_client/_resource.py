"""What every resource namespace shares: how it calls its client, and the path and value
encodings its methods use."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import httpx

from . import models
from .pagination import ListCall


def _seg(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("an id must be a non-empty string")
    return quote(value, safe="")


def _timestamp(value: datetime | str) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("pass an aware datetime (with tzinfo)")
        return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return value


def _one(model: type[models.Model], key: str | None = None) -> Callable[[httpx.Response], Any]:
    def parse(response: httpx.Response) -> Any:
        body = response.json()
        return model.from_wire(body[key] if key else body)
    return parse


class _Resource:
    def __init__(self, client: Any) -> None:
        self._client = client

    def _call(self, method: str, path: str, parse: Callable[[httpx.Response], Any], **kwargs: Any) -> Any:
        return self._client._run(method, path, parse, **kwargs)

    def _list(self, call: ListCall, start: str | None = None) -> Any:
        return self._client._paginate(call, start)
