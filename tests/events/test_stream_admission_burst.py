"""A burst of stream opens bearing one credential (a reconnect storm) is admitted by one job on a
hub thread (Hub.admit): the credential is looked up once for every open that joined before the
job started, and each open is still counted against the rate limits on its own, so the limit
refuses exactly the opens past it, in the order they asked. Each admission equals what `admit`
alone answers for the same request."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.conf import settings

from apps.access import admission as admission_module
from apps.oauth.audience import rest_audiences
from apps.core.errors import RateLimited, Unauthorized
from apps.stream.hub import get_hub
from tests.hub import run_on_hub
from tests.servers import UNTURNING_WINDOW_SECONDS, forget_rate_limit_counts

pytestmark = pytest.mark.django_db(transaction=True)  # the hub's threads read what was committed

LIMIT = 4
BURST = 7


@pytest.fixture
def limited(settings):  # noqa: F811 - pytest-django's fixture
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = LIMIT
    settings.CONNECT_RATE_LIMIT_WINDOW_SECONDS = int(UNTURNING_WINDOW_SECONDS)
    forget_rate_limit_counts()
    yield
    forget_rate_limit_counts()


def burst(authorization: str, count: int, monkeypatch) -> tuple[list, int]:
    """`count` opens ask together while the hub's threads are busy; how many lookups ran."""
    lookups = []
    real = admission_module.authenticate_bearer

    def counted(*args, **kwargs):
        lookups.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(admission_module, "authenticate_bearer", counted)
    audiences = rest_audiences(settings.CONNECT_BASE_URL)

    async def scenario():
        hub = get_hub()
        busy = threading.Event()
        blockers = [hub.run_db(busy.wait, 30) for _ in range(2)]  # both threads taken
        asks = [asyncio.ensure_future(hub.admit(authorization, audiences=audiences)) for _ in range(count)]
        await asyncio.sleep(0.05)
        busy.set()
        await asyncio.gather(*blockers)
        return await asyncio.gather(*asks)

    return run_on_hub(scenario()), len(lookups)


def test_one_lookup_for_the_burst_and_each_open_counted_in_order(acme, alice_key, limited, monkeypatch):
    admissions, lookups = burst(f"Bearer {alice_key}", BURST, monkeypatch)
    assert lookups == 1
    assert [a.error is None for a in admissions] == [True] * LIMIT + [False] * (BURST - LIMIT)
    assert all(isinstance(a.error, RateLimited) for a in admissions[LIMIT:])
    assert [a.rate.remaining for a in admissions] == [LIMIT - 1 - n for n in range(LIMIT)] + [0] * (BURST - LIMIT)
    assert len({a.principal.credential_id for a in admissions}) == 1
    # The same as `admit` alone: the next open is refused too, counted in the same buckets.
    alone = admission_module.admit(f"Bearer {alice_key}", audiences=rest_audiences(settings.CONNECT_BASE_URL))
    assert isinstance(alone.error, RateLimited) and alone.principal == admissions[0].principal


def test_a_bad_credential_is_refused_for_every_open_of_the_burst(acme, limited, monkeypatch):
    admissions, lookups = burst("Bearer ck_live_nothing", 3, monkeypatch)
    assert lookups == 1 and all(isinstance(a.error, Unauthorized) and a.principal is None for a in admissions)
