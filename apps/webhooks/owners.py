"""Doors that own webhook endpoints (`WebhookEndpoint.owner`), and what each adds to the drains.

An owning app sits above webhooks and is never imported from here: it registers a `Door` when
it is ready (its AppConfig), and the drains read it for each batch of its endpoints. A door may
add headers to every attempt, make some receiver answers final for a delivery (never retried,
the delivery's `stop_reason` saying why), and write each attempt's body from the stored one just
before it is signed, knowing which of the batch's deliveries were already acknowledged (a body
field that depends on the others' fate, such as the MCP Events watermark cursor).

REST's endpoints (owner "") have no door: every non-2xx is retried, as the contract says."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection, Sequence

from apps.webhooks.models import Delivery, StopReason, WebhookEndpoint

# The receiver answers a door may make final, and the reason each delivery records.
FINAL_STATUS_REASONS = {410: StopReason.RECEIVER_GONE, 413: StopReason.PAYLOAD_TOO_LARGE}

# `render(endpoint, batch)` → `body(delivery, acknowledged)`: the bytes to sign and send for one
# attempt, given the ids of this batch's deliveries the receiver already took or refused for good.
Render = Callable[[WebhookEndpoint, Sequence[Delivery]], Callable[[Delivery, Collection[str]], bytes]]


@dataclass(frozen=True)
class Door:
    headers: Callable[[WebhookEndpoint], list[tuple[str, str]]] = lambda endpoint: []
    final_statuses: frozenset[int] = field(default_factory=frozenset)
    render: Render | None = None

    def __post_init__(self) -> None:
        unknown = set(self.final_statuses) - set(FINAL_STATUS_REASONS)
        if unknown:
            raise ValueError(f"no stop reason for HTTP {sorted(unknown)}: add one to FINAL_STATUS_REASONS")


NO_DOOR = Door()
_DOORS: dict[str, Door] = {}


def register(owner: str, door: Door) -> None:
    if not owner:
        raise ValueError("REST's endpoints (owner \"\") follow the contract and take no door")
    _DOORS[owner] = door


def door_of(endpoint: WebhookEndpoint) -> Door:
    """The endpoint's owner's door; `NO_DOOR` for REST's endpoints (and an owner not loaded)."""
    return _DOORS.get(endpoint.owner, NO_DOOR) if endpoint.owner else NO_DOOR
