"""Doors that own webhook endpoints (`WebhookEndpoint.owner`), and what each adds to the drains.

An owning app sits above webhooks and is never imported from here: it registers a `Door` when
it is ready (its AppConfig), and the drains read it for each batch of its endpoints. A door may
add headers to every attempt, make some receiver answers final for a delivery (never retried,
the delivery's `stop_reason` saying why), and write each attempt's body from the stored one just
before it is signed, knowing which of the batch's deliveries were already acknowledged (a body
field that depends on the others' fate, such as the MCP Events watermark cursor). A door may
also hold an endpoint's delivery after sustained failure (`suspend`: the drains then claim none
of its deliveries until the owner lifts it, `services.resume_endpoint`), and run its own upkeep
with every sweep (`upkeep`: work the owner finishes after a commit, such as a catch-up).

REST's endpoints (owner "") have no door: every non-2xx is retried, as the contract says."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Collection, Sequence

from apps.webhooks.models import Delivery, StopReason, WebhookEndpoint

logger = logging.getLogger("connect.webhooks")

# The receiver answers a door may make final, and the reason each delivery records.
FINAL_STATUS_REASONS = {410: StopReason.RECEIVER_GONE, 413: StopReason.PAYLOAD_TOO_LARGE}

# `render(endpoint, batch)` → `body(delivery, acknowledged)`: the bytes to sign and send for one
# attempt, given the ids of this batch's deliveries the receiver already took or refused for good.
Render = Callable[[WebhookEndpoint, Sequence[Delivery]], Callable[[Delivery, Collection[str]], bytes]]


@dataclass(frozen=True)
class Suspend:
    """Hold an endpoint's delivery when, over the last `window_seconds` (never before it was
    last resumed), it had at least `min_attempts` attempts and more than `failure_rate` of them
    failed. A receiver answer the door makes final is not a failure (the receiver chose it)."""

    window_seconds: int
    min_attempts: int
    failure_rate: float


@dataclass(frozen=True)
class Door:
    headers: Callable[[WebhookEndpoint], list[tuple[str, str]]] = lambda endpoint: []
    final_statuses: frozenset[int] = field(default_factory=frozenset)
    render: Render | None = None
    suspend: Suspend | None = None
    upkeep: Callable[[], object] | None = None

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


def upkeep() -> None:
    """Every door's upkeep (the sweeper calls it); one that fails is logged, the others run."""
    for owner, door in list(_DOORS.items()):
        if door.upkeep is None:
            continue
        try:
            door.upkeep()
        except Exception:  # noqa: BLE001 - one owner's upkeep never stops the sweeper
            logger.exception("upkeep of webhook owner %s failed; the next sweep tries again", owner)
