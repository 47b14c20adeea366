"""Webhook test fixtures: a queue name of this process's own (so runs sharing one Redis never
take each other's tasks), local receivers, and a live `serve` (daphne + django-q2 cluster +
sweeper) with a compressed retry schedule."""

from __future__ import annotations

import os
import time

import pytest
from django.test import Client
from django_q.conf import Conf

from tests import factories
from tests.webhooks.receiver import JwksServer, Receiver

QUEUE_NAME = f"connect-test-{os.getpid()}"
Conf.PREFIX = Conf.CLUSTER_NAME = QUEUE_NAME

LIVE_ENV = {
    "CONNECT_Q_NAME": QUEUE_NAME,
    "CONNECT_WEBHOOKS_ALLOW_PRIVATE": "1",
    "CONNECT_WEBHOOK_RETRY_SCHEDULE": "0,0,0,0,0,0",
    "CONNECT_WEBHOOK_TIMEOUT_SECONDS": "4",
    "CONNECT_WEBHOOK_LEASE_SECONDS": "6",
    "CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS": "4",
    "CONNECT_WEBHOOK_SWEEP_SECONDS": "0.2",
    "CONNECT_Q_WORKERS": "2",
}


@pytest.fixture(autouse=True)
def fresh_process_caches():
    """Each test's database starts empty: forget keys and checks cached from an earlier one."""
    from apps.webhooks import delivery, keys

    keys._seeds.clear()
    delivery._installation_checks.clear()
    yield
    keys._seeds.clear()
    delivery._installation_checks.clear()


@pytest.fixture
def webhook_settings(settings):
    """The test process's side of LIVE_ENV (it creates deliveries and their queue leases)."""
    settings.CONNECT_WEBHOOKS_ALLOW_PRIVATE = True
    settings.CONNECT_WEBHOOK_RETRY_SCHEDULE = [0, 0, 0, 0, 0, 0]
    settings.CONNECT_WEBHOOK_TIMEOUT_SECONDS = 1.5
    settings.CONNECT_WEBHOOK_LEASE_SECONDS = 3
    settings.CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS = 4
    from apps.webhooks import delivery

    delivery._sender = None  # rebuilt with these settings
    yield settings
    delivery._sender = None


@pytest.fixture
def writer_key(alice) -> str:
    return factories.api_key(alice, factories.ALL_SCOPES)


@pytest.fixture
def jwks_server(db):
    server = JwksServer()
    yield server
    server.close()


@pytest.fixture
def receiver(jwks_server):
    r = Receiver(jwks_server.url)
    yield r
    r.close()


def wait_until(predicate, timeout: float = 90, interval: float = 0.1):
    """Poll until `predicate` is truthy. The bound is generous: the worker is a separate process
    on a shared machine (30 s once ran out under load on PostgreSQL); a pass takes seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


@pytest.fixture
def staff(alice) -> Client:
    """An admin client logged in as alice, made staff and superuser."""
    alice.user.is_staff = alice.user.is_superuser = True
    alice.user.save()
    client = Client()
    client.force_login(alice.user)
    return client
