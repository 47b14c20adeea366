"""`client.deliveries`: webhook deliveries (newest first), one with its attempts, and replay."""

from __future__ import annotations

from functools import cached_property

from .. import models
from .._resource import (AsyncAPIResource, SyncAPIResource, _one, _seg, to_async_raw, to_async_raw_list, to_raw,
                         to_raw_list)
from .._response import Request
from ..pagination import AsyncPaginator, ListCall, Paginator
from ..types import DeliveryKind, DeliveryStatus, EventType

_PATH = "/api/v1/webhook-deliveries"


def _list(endpoint_id: str | None, status: DeliveryStatus | None, event_type: EventType | None,
          event_id: str | None, kind: DeliveryKind | None, limit: int | None) -> ListCall[models.Delivery]:
    params = {"endpointId": endpoint_id, "status": status, "eventType": event_type, "eventId": event_id,
              "kind": kind, "limit": limit}
    return ListCall(_PATH, params, models.Delivery.from_wire)


def _get(delivery_id: str) -> Request[models.Delivery]:
    return Request("GET", f"{_PATH}/{_seg(delivery_id)}", _one(models.Delivery))


def _replay(delivery_id: str) -> Request[models.Delivery]:
    return Request("POST", f"{_PATH}/{_seg(delivery_id)}/replay", _one(models.Delivery))


class Deliveries(SyncAPIResource):
    @cached_property
    def with_raw_response(self) -> DeliveriesWithRawResponse:
        return DeliveriesWithRawResponse(Deliveries(self._client, raw=True))

    def list(self, *, endpoint_id: str | None = None, status: DeliveryStatus | None = None,
             event_type: EventType | None = None, event_id: str | None = None, kind: DeliveryKind | None = None,
             limit: int | None = None) -> Paginator[models.Delivery]:
        """Newest first."""
        return self._list(_list(endpoint_id, status, event_type, event_id, kind, limit))

    def get(self, delivery_id: str) -> models.Delivery:
        """With its attempts."""
        return self._send(_get(delivery_id))

    def replay(self, delivery_id: str) -> models.Delivery:
        """A new delivery of the same event (terminal deliveries only)."""
        return self._send(_replay(delivery_id))


class AsyncDeliveries(AsyncAPIResource):
    @cached_property
    def with_raw_response(self) -> AsyncDeliveriesWithRawResponse:
        return AsyncDeliveriesWithRawResponse(AsyncDeliveries(self._client, raw=True))

    def list(self, *, endpoint_id: str | None = None, status: DeliveryStatus | None = None,
             event_type: EventType | None = None, event_id: str | None = None, kind: DeliveryKind | None = None,
             limit: int | None = None) -> AsyncPaginator[models.Delivery]:
        return self._list(_list(endpoint_id, status, event_type, event_id, kind, limit))

    async def get(self, delivery_id: str) -> models.Delivery:
        return await self._send(_get(delivery_id))

    async def replay(self, delivery_id: str) -> models.Delivery:
        return await self._send(_replay(delivery_id))


class DeliveriesWithRawResponse:
    def __init__(self, deliveries: Deliveries) -> None:
        self.list = to_raw_list(deliveries.list)
        self.get = to_raw(deliveries.get)
        self.replay = to_raw(deliveries.replay)


class AsyncDeliveriesWithRawResponse:
    def __init__(self, deliveries: AsyncDeliveries) -> None:
        self.list = to_async_raw_list(deliveries.list)
        self.get = to_async_raw(deliveries.get)
        self.replay = to_async_raw(deliveries.replay)
