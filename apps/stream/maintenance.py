"""The hub's periodic duties, each on its own so that one failing never starves another:
heartbeat pings to every stream, renewal of the slot leases of the streams it holds, and the end
of every stream whose credential was revoked (or whose member was deactivated).

Invariant: a slot lives exactly as long as its stream. The hub renews, by id, only the slots of
the streams it holds, so a slot whose stream is gone lapses; a stream whose slot row is gone
ends (its client resumes)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Awaitable, Callable

from django.conf import settings

from apps.access.credentials import invalid_credentials
from apps.stream import slots

if TYPE_CHECKING:
    from apps.stream.hub import Hub

logger = logging.getLogger("connect.events")


async def maintain(hub: Hub) -> None:
    heartbeat = settings.CONNECT_SSE_HEARTBEAT_SECONDS
    check_every = max(0.25, heartbeat / 2)
    renew_every = slots.renew_every_seconds()
    next_ping = next_check = time.monotonic()
    next_lease = time.monotonic() + renew_every
    while True:
        await asyncio.sleep(min(check_every, heartbeat, renew_every))
        now = time.monotonic()
        if now >= next_ping:
            next_ping = now + heartbeat
            _ping_all(hub)  # not a loop here: its variable would keep a stream alive
        if now >= next_lease:
            next_lease = now + renew_every
            await _duty(renew_leases, hub)
        if now >= next_check:
            next_check = now + check_every
            await _duty(close_revoked, hub)


def _ping_all(hub: Hub) -> None:
    for stream in hub.all_streams():
        stream.ping()


async def _duty(job: Callable[[Hub], Awaitable[None]], hub: Hub) -> None:
    try:
        await job(hub)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - keep maintaining; log and retry next tick
        logger.exception("event hub maintenance failed")


async def renew_leases(hub: Hub) -> None:
    """By id, the slots of the streams held now: a slot whose stream is gone (its consumer
    died, its release failed, its acquire was abandoned) is never renewed, so it lapses."""
    slot_ids = hub.live_slot_ids()
    renewed = await hub.run_db(slots.renew_leases, slot_ids=slot_ids, retry=True)
    if renewed < len(slot_ids):
        # Rows gone under open streams (renewal stalled past a lease, rows deleted by hand):
        # those streams end, so rows and streams agree again; their clients resume.
        present = await hub.run_db(slots.existing_slots, slot_ids, retry=True)
        lost = [s for s in hub.all_streams() if s.slot_id is not None and s.slot_id not in present]
        logger.warning("%d open streams had lost their slot rows; ending them", len(lost))
        for stream in lost:
            stream.close("slot_lost")


async def close_revoked(hub: Hub) -> None:
    refs = {s.credential for s in hub.all_streams()}
    if not refs:
        return
    bad = await hub.run_db(invalid_credentials, refs, retry=True)
    if bad:
        for stream in hub.all_streams():
            if stream.credential in bad:
                stream.close("credential_revoked")
