"""A live `serve --workers 2` with JSON logs and a metrics token, and helpers to read what it
wrote and exposed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import LiveServer, collected_static, start  # noqa: F401 - a fixture

METRICS_TOKEN = "scrape-token-for-tests-0123456789"


@pytest.fixture(scope="module")
def obs_server(django_db_setup, django_db_blocker, tmp_path_factory, collected_static):
    """Two daphne processes (no task side), JSON logs, `/metrics` behind METRICS_TOKEN, and the
    multiprocess directory where the test can look at it."""
    metrics_dir = tmp_path_factory.mktemp("metrics")
    server = start(
        tmp_path_factory.mktemp("obs-server"),
        workers=2,
        env={
            "CONNECT_LOG_FORMAT": "json",
            "CONNECT_METRICS_TOKEN": METRICS_TOKEN,
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
            "STATIC_ROOT": str(collected_static),
        },
    )
    server.metrics_dir = metrics_dir
    yield server
    server.stop()


def json_lines(server: LiveServer) -> list[dict]:
    """Every JSON line the server wrote so far."""
    lines = []
    for line in Path(server.log).read_text().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def scrape(url: str, token: str = METRICS_TOKEN) -> dict[tuple[str, tuple], float]:
    """`/metrics` as {(sample name, sorted labels): value}."""
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code == 200, response.text
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: dict, name: str, **labels: str) -> float:
    return sum(
        value for (sample, sample_labels), value in samples.items()
        if sample == name and all((k, v) in sample_labels for k, v in labels.items())
    )  # fmt: skip
