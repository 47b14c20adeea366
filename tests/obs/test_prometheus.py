"""Issue 22 (4): a real Prometheus (Debian's `prometheus`, installed by .ci/run) scrapes a live
`serve --workers 2` with its task cluster, using the scrape config docs/operations.md shows, and
PromQL over Prometheus' own HTTP API sees every request the test made — answered by both daphne
processes — and one failed webhook attempt counted once."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import httpx
import pytest
import yaml

from apps.webhooks.models import Delivery
from tests import docs, factories
from tests.obs.conftest import METRICS_TOKEN, json_lines
from tests.servers import ROOT, free_port, start, wait_until
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

PROMETHEUS = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)


def documented_scrape_config() -> dict:
    [block] = [b for b in docs.blocks(ROOT / "docs" / "operations.md") if b.info == "yaml" and "scrape_configs" in b.text]
    return yaml.safe_load(block.text)


@pytest.fixture
def server(tmp_path, django_db_blocker):
    env = {
        "CONNECT_Q_NAME": f"connect-prom-{os.getpid()}",
        "CONNECT_WEBHOOKS_ALLOW_PRIVATE": "1",
        "CONNECT_WEBHOOK_TIMEOUT_SECONDS": "4",
        "CONNECT_WEBHOOK_SWEEP_SECONDS": "0.5",
        "CONNECT_Q_WORKERS": "2",
        "CONNECT_LOG_FORMAT": "json",
        "CONNECT_METRICS_TOKEN": METRICS_TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
    }
    live = start(tmp_path / "serve", workers=2, tasks=True, env=env)
    yield live
    live.stop()


@pytest.fixture
def prometheus(server, tmp_path):
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is not installed (.ci/run installs Debian's `prometheus`)")
    token_file = tmp_path / "connect-metrics-token"
    token_file.write_text(METRICS_TOKEN)
    config = documented_scrape_config()
    [job] = config["scrape_configs"]
    job["scrape_interval"] = "1s"
    job["authorization"]["credentials_file"] = str(token_file)
    job["static_configs"] = [{"targets": [f"127.0.0.1:{server.port}"]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(url), what="prometheus to start", timeout=60, every=0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def promql(url: str, query: str) -> float | None:
    """The single value of an instant query, None when it has no result yet."""
    body = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=10).json()
    assert body["status"] == "success", body
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def settles_at(url: str, query: str, expected: float) -> None:
    """Waits until `query` answers `expected` and it stays so over three more scrapes."""
    wait_until(lambda: promql(url, query) == expected, what=f"{query} == {expected}", timeout=90, every=0.5)
    time.sleep(3)
    assert promql(url, query) == expected


def test_prometheus_sees_every_request_across_both_processes_and_one_webhook_failure(
    server, prometheus, alice
):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    receiver = Receiver(f"{server.url}/.well-known/webhook-signing-keys.json", behaviour=lambda n: 500)
    try:
        made, pids, ids = 0, set(), set()
        while len(pids) < 2 and made < 60:  # fresh connections until both processes answered
            for _ in range(10):
                response = httpx.get(f"{server.url}/api/v1/sessions", headers={"Authorization": f"Bearer {key}"})
                assert response.status_code == 200
                ids.add(response.headers["X-Request-Id"])
            made += 10
            lines = [line for line in json_lines(server) if line.get("request_id") in ids and line["logger"] == "connect.access"]
            pids = {line["process"] for line in lines}
        assert len(pids) == 2, "both daphne processes answered"
        settles_at(prometheus, 'sum(connect_http_requests_total{route="api/v1/sessions",status="200"})', made)

        # Another live server of this test worker (tests/webhooks' session server) sweeps the same
        # database and may claim a due delivery first: its attempt is in its own process's metrics,
        # not this serve's. So a test delivery is sent again until this serve made an attempt, and
        # the check is that every attempt this serve made (its connect.webhooks lines) is counted
        # once — and nothing else.
        with server.client(headers={"Authorization": f"Bearer {key}"}) as client:
            created = client.post("/api/v1/webhooks", json={"name": "failing", "url": receiver.url,
                                                            "filters": [{"type": "session.created"}]})  # fmt: skip
            assert created.status_code == 201, created.text
            endpoint_id = created.json()["id"]
            for sent in range(1, 6):
                tested = client.post(f"/api/v1/webhooks/{endpoint_id}/test")
                assert tested.status_code in (200, 201, 202), tested.text
                wait_until(lambda: Delivery.objects.filter(endpoint_id=endpoint_id, status="dead_letter").count() == sent,
                           what="the test delivery to fail", timeout=60)  # fmt: skip
                time.sleep(1)  # its log line is written after the row
                attempts = [line for line in json_lines(server) if line["logger"] == "connect.webhooks"]
                if attempts:
                    break
        assert attempts, "this serve made none of five attempts"
        ours = len(attempts)
        settles_at(prometheus, 'sum(connect_webhook_attempts_total{outcome="http_error"})', ours)
        assert promql(prometheus, 'sum(connect_webhook_attempts_total{outcome="succeeded"})') in (None, 0)
        settles_at(prometheus, "sum(connect_webhook_dead_letters_total)", ours)
        attempt = attempts[0]
        delivery = Delivery.objects.get(pk=attempt["delivery_id"])
        assert (delivery.endpoint_id, attempt["endpoint_id"], attempt["outcome"], attempt["http_status"],
                attempt["error_kind"], attempt["level"]) == (
            endpoint_id, endpoint_id, "dead_letter", 500, "http_error", "WARNING")  # fmt: skip
        assert attempt["duration_ms"] >= 0
    finally:
        receiver.close()
