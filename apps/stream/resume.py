"""Resume: what a client reconnecting with `Last-Event-ID` missed, read from the event log a
chunk at a time, exactly as REST pages it. Streams carry events in log order (the follower), so
the client's last id is a place in the log and a resume from it misses nothing and repeats
nothing; live copies of what the replay covers are dropped by the stream's `floor`."""

from __future__ import annotations

import time

from django.conf import settings

from apps.events import selectors
from apps.events.filters import Subscription
from apps.events.positions import Position, event_id_ms
from apps.events.representations import frame_for
from apps.events.retention import oldest_complete_ms
from apps.stream.streams import RenderedSubscription, Stream

# A resume further behind than this many events of its types is refused (`: resume-unavailable`).
RESUME_MAX_EVENTS = 5000

RESUME_CHUNK = 200  # events one resume read brings: a resuming stream holds one chunk at a time


class ResumeRead:
    """One chunk read: every event of the types after a place, each as (log key, type, session id,
    frame), the place reached, and whether that is the end (the read was short: it reached the
    horizon). Shared by the streams that joined the read, and so is each subscription's share."""

    __slots__ = ("rows", "reached", "done", "shares")

    def __init__(self, rows: list[tuple[tuple[int, str], str, str | None, bytes]], reached: Position,
                 done: bool) -> None:
        self.rows, self.reached, self.done = rows, reached, done
        self.shares: dict[Subscription, tuple[list[tuple[tuple[int, str], bytes]], bytes]] = {}

    def share(self, subscription: Subscription) -> tuple[list[tuple[tuple[int, str], bytes]], bytes]:
        """The rows `subscription` matches, as (log key, frame), and their frames as one write:
        made once per subscription (a storm's clients mostly hold the same one), and the bytes
        shared by every stream writing them. Read-only for the caller."""
        share = self.shares.get(subscription)
        if share is None:
            matches = subscription.matches
            if isinstance(subscription, RenderedSubscription):
                items = subscription.render([row for row in self.rows if matches(row[1], row[2])])
            else:
                items = [(key, frame) for key, type_, session_id, frame in self.rows if matches(type_, session_id)]
            share = self.shares[subscription] = (items, b"".join(frame for _, frame in items))
        return share


def resume_start(*, workspace_id: int, last_event_id: str, types: frozenset[str]) -> ResumeRead | None:
    """The first chunk of what a client reconnecting after `last_event_id` missed, in log order.
    None when that id is not in this workspace's log (unknown, purged), older than the resume
    window, or too far behind (more than RESUME_MAX_EVENTS of its types after it).

    Read from the log exactly as REST reads it (settled rows only) with the stream's own types
    (its filters apply to each chunk, `Replay.take`): streams carry events in log order (the
    follower), so the client holds every event of its subscription up to its last id and none
    after it; rows not settled yet come live, in order, once they are."""
    ms = event_id_ms(last_event_id)
    if ms is None or not _resumable(ms, types):
        return None
    place = selectors.position_of(workspace_id=workspace_id, event_id=last_event_id)
    if place is None:
        return None
    return resume_after(workspace_id=workspace_id, after=place, types=types)


def _resumable(ms: int, types: frozenset[str]) -> bool:
    window_ms = settings.CONNECT_SSE_RESUME_SECONDS * 1000
    return bool(types) and ms >= int(time.time() * 1000) - window_ms and ms >= oldest_complete_ms(types)


def resume_after(*, workspace_id: int, after: Position, types: frozenset[str]) -> ResumeRead | None:
    """`resume_start` from a place in the log (a `pos_` cursor, or the place of the client's last
    id): None when it is older than the resume window or retention, or too far behind."""
    if not _resumable(after.ms, types):
        return None
    place = after
    read = resume_chunk(workspace_id=workspace_id, after=place, types=types)
    if not read.done and selectors.log_has_more_than(RESUME_MAX_EVENTS, after=place, workspace_id=workspace_id,
                                                   types=types):
        return None
    return read


def resume_chunk(*, workspace_id: int, after: Position, types: frozenset[str]) -> ResumeRead:
    """Up to RESUME_CHUNK events of `types` after `after` (settled), the place reached, and
    whether that was all (a short read stands at the horizon)."""
    rows, reached = selectors.read_log(after=after, limit=RESUME_CHUNK, workspace_id=workspace_id, types=types)
    return ResumeRead([((e.position, e.id), e.type, e.session_id, frame_for(e)) for e in rows], reached,
                      len(rows) < RESUME_CHUNK)


class Replay:
    """A resume in progress: the stream's share of the chunk read last (`items`, in log order,
    and `data`, their frames as one write), the place that read reached, and whether nothing
    more is to be read. The consumer writes a chunk once the client's socket takes more, then
    reads the next (`Hub.resume_more`): a resuming stream holds one chunk, never its whole
    missed window.

    It ends at a short read (it reached the horizon, which is past everything the follower had
    dispatched before the stream registered; what comes later is in its live queue), or as soon
    as the live queue's first event is at or below the place reached: the queue holds every event
    of the subscription the follower read after the stream registered, so from there on the
    queue has the rest. Live copies at or below the place reached are dropped (`floor`)."""

    __slots__ = ("workspace_id", "types", "subscription", "items", "data", "reached", "done")

    def __init__(self, workspace_id: int, types: frozenset[str], subscription: Subscription, read: ResumeRead) -> None:
        self.workspace_id, self.types, self.subscription = workspace_id, types, subscription
        self.take(read)

    def take(self, read: ResumeRead) -> None:
        self.reached, self.done = read.reached, read.done
        self.items, self.data = read.share(self.subscription)

    def caught_up(self, stream: Stream) -> bool:
        """After the chunk is written: whether the replay is over. Drops the live copies the
        replay covered from the stream's queue, and moves its floor to the place reached."""
        floor = stream.floor = self.reached.key()
        queue = stream.queue
        covered = bool(queue) and queue[0][0] <= floor
        while queue and queue[0][0] <= floor:
            queue.popleft()
        return self.done or covered
