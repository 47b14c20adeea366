"""Where an endpoint's deliveries stand in the event log: its watermark, a log position
(apps/events/positions.py) at or before which every event the endpoint was given has been
acknowledged by the receiver or abandoned (its delivery terminal: a dead letter, cancelled,
refused for good). A reader that resumes the log from it misses nothing the endpoint was owed.

It is the lowest of: the log's settled end (the horizon: no row can still commit below it, and a
delivery is written in its event's transaction, so every delivery below it is visible); just
before the event of the oldest delivery still pending or retrying; and, for one attempt, just
after that delivery's own event (the receiver holds it once it answers). "Just before" is the
end of the previous position, so the rows of the same transaction come again, never too few.
Deliveries retry one by one and arrive in any order; the watermark never passes one that has not
arrived. An event purged from the log (past its retention) has no position and is passed over.
While its owner still owes a catch-up (`WebhookEndpoint.catch_up_after`), it never passes that
position either: events the catch-up may still queue lie above it."""

from __future__ import annotations

from typing import Collection, Sequence

from django.db.models import OuterRef, Subquery

from apps.events.models import Event
from apps.events.positions import BadAfter, Position, decode_position, event_id_ms
from apps.events.retention import now_ms
from apps.events.selectors import horizon
from apps.webhooks.models import ACTIVE_STATUSES, Delivery, DeliveryKind, WebhookEndpoint


def _before(seq: int, event_id: str) -> Position:
    return Position(max(seq - 1, 0), "", event_id_ms(event_id) or 0)


def _lowest(*places: Position) -> Position:
    return min(places, key=Position.key)


def _oldest_active(endpoint_id: str, excluding: Collection[str] = ()) -> tuple[int, str] | None:
    """(position, event id) of the endpoint's earliest event still pending or retrying."""
    position = Event.objects.filter(pk=OuterRef("event_id")).values("position")[:1]
    active = (Delivery.objects.filter(endpoint_id=endpoint_id, status__in=ACTIVE_STATUSES, kind=DeliveryKind.EVENT)
              .exclude(id__in=list(excluding)).annotate(at=Subquery(position)).filter(at__isnull=False))
    return active.order_by("at", "event_id").values_list("at", "event_id").first()


def _held(endpoint: WebhookEndpoint) -> list[Position]:
    """The catch-up's start, while one is owed (an unreadable one holds at the log's start)."""
    if not endpoint.catch_up_after:
        return []
    try:
        return [decode_position(endpoint.catch_up_after)]
    except BadAfter:
        return [Position(0, "", 0)]


def current(endpoint: WebhookEndpoint) -> Position:
    """The endpoint's watermark now (what a subscribe or refresh answers with)."""
    settled_end = Position(horizon() - 1, "", now_ms())
    oldest = _oldest_active(endpoint.id)
    places = [settled_end, *_held(endpoint)] + ([] if oldest is None else [_before(*oldest)])
    return _lowest(*places)


class Batch:
    """The watermark of each attempt of one batch of an endpoint's deliveries: read once (three
    statements; the catch-up hold comes with the endpoint's row), then `at(delivery,
    acknowledged)` per attempt as the batch goes on."""

    def __init__(self, endpoint: WebhookEndpoint, deliveries: Sequence[Delivery]) -> None:
        ids = [d.id for d in deliveries]
        self.settled_end = Position(horizon() - 1, "", now_ms())
        self.held = _held(endpoint)
        oldest = _oldest_active(endpoint.id, excluding=ids)
        self.outside = None if oldest is None else _before(*oldest)
        events = {d.event_id for d in deliveries}
        self.positions = dict(Event.objects.filter(pk__in=events).values_list("pk", "position"))
        self.deliveries = list(deliveries)

    def at(self, delivery: Delivery, acknowledged: Collection[str]) -> Position:
        """The watermark a body of `delivery` may carry: `acknowledged` are the ids of this
        batch's deliveries the receiver took (2xx) or refused for good before it."""
        places = [self.settled_end, *self.held] + ([self.outside] if self.outside is not None else [])
        for other in self.deliveries:
            seq = self.positions.get(other.event_id)
            if seq is None or other.id in acknowledged:
                continue
            if other.id == delivery.id:
                places.append(Position(seq, other.event_id, event_id_ms(other.event_id) or 0))
            else:
                places.append(_before(seq, other.event_id))
        return _lowest(*places)
