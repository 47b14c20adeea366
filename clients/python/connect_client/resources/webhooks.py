"""`client.webhooks`: endpoints (create, read, update, delete), a test request, recovery, and the
rotation of a Standard Webhooks secret."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import cached_property
from typing import Any

from .. import models
from .._resource import (AsyncAPIResource, SyncAPIResource, _nothing, _one, _seg, _timestamp, to_async_raw,
                         to_async_raw_list, to_raw, to_raw_list)
from .._response import Request
from ..pagination import AsyncPaginator, ListCall, Paginator
from ..types import Filter, WebhookSigning
from .deliveries import _replay
from .events import _filters

_PATH = "/api/v1/webhooks"


def _list(limit: int | None) -> ListCall[models.Webhook]:
    return ListCall(_PATH, {"limit": limit}, models.Webhook.from_wire)


def _create(name: str, url: str, filters: Iterable[Filter | models.WebhookFilter],
            signing: WebhookSigning | None) -> Request[models.Webhook]:
    body: dict[str, Any] = {"name": name, "url": url, "filters": _filters(filters)}
    if signing is not None:
        body["signing"] = signing
    return Request("POST", _PATH, _one(models.Webhook), json=body)


def _get(webhook_id: str) -> Request[models.Webhook]:
    return Request("GET", f"{_PATH}/{_seg(webhook_id)}", _one(models.Webhook))


def _update(webhook_id: str, name: str | None, url: str | None, filters: Iterable[Filter | models.WebhookFilter] | None,
            active: bool | None, signing: WebhookSigning | None) -> Request[models.Webhook]:
    body: dict[str, Any] = {"name": name, "url": url, "filters": _filters(filters), "active": active,
                            "signing": signing}
    return Request("PATCH", f"{_PATH}/{_seg(webhook_id)}", _one(models.Webhook),
                   json={field: value for field, value in body.items() if value is not None})


def _delete(webhook_id: str) -> Request[None]:
    return Request("DELETE", f"{_PATH}/{_seg(webhook_id)}", _nothing)


def _test(webhook_id: str) -> Request[models.Delivery]:
    return Request("POST", f"{_PATH}/{_seg(webhook_id)}/test", _one(models.Delivery))


def _rotate_secret(webhook_id: str, grace_seconds: int | None) -> Request[models.Webhook]:
    body = {"graceSeconds": grace_seconds} if grace_seconds is not None else {}
    return Request("POST", f"{_PATH}/{_seg(webhook_id)}/rotate-secret", _one(models.Webhook), json=body)


def _recover(webhook_id: str, since: datetime | str, until: datetime | str | None) -> Request[models.Recovery]:
    body = {"since": _timestamp(since), **({"until": _timestamp(until)} if until is not None else {})}
    return Request("POST", f"{_PATH}/{_seg(webhook_id)}/recover", _one(models.Recovery), json=body)


class Webhooks(SyncAPIResource):
    @cached_property
    def with_raw_response(self) -> WebhooksWithRawResponse:
        return WebhooksWithRawResponse(Webhooks(self._client, raw=True))

    def list(self, *, limit: int | None = None) -> Paginator[models.Webhook]:
        return self._list(_list(limit))

    def create(self, *, name: str, url: str, filters: Iterable[Filter | models.WebhookFilter],
               signing: WebhookSigning | None = None) -> models.Webhook:
        """`signing="standard-webhooks"`: the result's `signing_secret` (shown this once)."""
        return self._send(_create(name, url, filters, signing))

    def get(self, webhook_id: str) -> models.Webhook:
        return self._send(_get(webhook_id))

    def update(self, webhook_id: str, *, name: str | None = None, url: str | None = None,
               filters: Iterable[Filter | models.WebhookFilter] | None = None,
               active: bool | None = None, signing: WebhookSigning | None = None) -> models.Webhook:
        """Only the fields passed change."""
        return self._send(_update(webhook_id, name, url, filters, active, signing))

    def rotate_secret(self, webhook_id: str, *, grace_seconds: int | None = None) -> models.Webhook:
        """A new Standard Webhooks secret (`signing_secret`, shown this once); the old one signs
        beside it for `grace_seconds` (the server's default: one day; 0 after a leak)."""
        return self._send(_rotate_secret(webhook_id, grace_seconds))

    def delete(self, webhook_id: str) -> None:
        return self._send(_delete(webhook_id))

    def test(self, webhook_id: str) -> models.Delivery:
        """Send one signed test request; the test delivery."""
        return self._send(_test(webhook_id))

    def replay(self, delivery_id: str) -> models.Delivery:
        """Same as `deliveries.replay`."""
        return self._send(_replay(delivery_id))

    def recover(self, webhook_id: str, *, since: datetime | str,
                until: datetime | str | None = None) -> models.Recovery:
        """Queue again what this endpoint missed in the window (`queued`, and `more` when the
        server's per-call cap left some: call again with the same window)."""
        return self._send(_recover(webhook_id, since, until))


class AsyncWebhooks(AsyncAPIResource):
    @cached_property
    def with_raw_response(self) -> AsyncWebhooksWithRawResponse:
        return AsyncWebhooksWithRawResponse(AsyncWebhooks(self._client, raw=True))

    def list(self, *, limit: int | None = None) -> AsyncPaginator[models.Webhook]:
        return self._list(_list(limit))

    async def create(self, *, name: str, url: str, filters: Iterable[Filter | models.WebhookFilter],
                     signing: WebhookSigning | None = None) -> models.Webhook:
        return await self._send(_create(name, url, filters, signing))

    async def get(self, webhook_id: str) -> models.Webhook:
        return await self._send(_get(webhook_id))

    async def update(self, webhook_id: str, *, name: str | None = None, url: str | None = None,
                     filters: Iterable[Filter | models.WebhookFilter] | None = None,
                     active: bool | None = None, signing: WebhookSigning | None = None) -> models.Webhook:
        return await self._send(_update(webhook_id, name, url, filters, active, signing))

    async def rotate_secret(self, webhook_id: str, *, grace_seconds: int | None = None) -> models.Webhook:
        return await self._send(_rotate_secret(webhook_id, grace_seconds))

    async def delete(self, webhook_id: str) -> None:
        return await self._send(_delete(webhook_id))

    async def test(self, webhook_id: str) -> models.Delivery:
        return await self._send(_test(webhook_id))

    async def replay(self, delivery_id: str) -> models.Delivery:
        return await self._send(_replay(delivery_id))

    async def recover(self, webhook_id: str, *, since: datetime | str,
                      until: datetime | str | None = None) -> models.Recovery:
        return await self._send(_recover(webhook_id, since, until))


class WebhooksWithRawResponse:
    def __init__(self, webhooks: Webhooks) -> None:
        self.list = to_raw_list(webhooks.list)
        self.create = to_raw(webhooks.create)
        self.get = to_raw(webhooks.get)
        self.update = to_raw(webhooks.update)
        self.rotate_secret = to_raw(webhooks.rotate_secret)
        self.delete = to_raw(webhooks.delete)
        self.test = to_raw(webhooks.test)
        self.replay = to_raw(webhooks.replay)
        self.recover = to_raw(webhooks.recover)


class AsyncWebhooksWithRawResponse:
    def __init__(self, webhooks: AsyncWebhooks) -> None:
        self.list = to_async_raw_list(webhooks.list)
        self.create = to_async_raw(webhooks.create)
        self.get = to_async_raw(webhooks.get)
        self.update = to_async_raw(webhooks.update)
        self.rotate_secret = to_async_raw(webhooks.rotate_secret)
        self.delete = to_async_raw(webhooks.delete)
        self.test = to_async_raw(webhooks.test)
        self.replay = to_async_raw(webhooks.replay)
        self.recover = to_async_raw(webhooks.recover)
