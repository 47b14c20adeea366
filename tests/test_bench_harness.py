"""The benchmark scripts share one harness (bench/harness.py) and import in one direction, read
from the source (tests/import_graph.py): the harness imports no other module of bench/, no
modules of bench/ import each other round a circle, and the scripts that start servers, make
databases or load a server do it with the harness's functions, not code of their own."""

from __future__ import annotations

import pytest

from tests import import_graph
from tests.import_graph import ROOT, cycles

# Scripts moved onto the harness: what each did with code of its own is the harness's now.
ON_THE_HARNESS = ("ratelimit.py", "serve_rss.py", "webhooks_admin.py", "search_probe.py", "ratelimit_counters.py",
                  "mechanisms_inprocess.py", "probe.py")
OWN_MACHINERY = ("def free_port", "def manage(", "def wrk(", "CREATE DATABASE", '"serve"', "django.setup()",
                 '"psql"', "READ_SCOPES =")


@pytest.fixture(scope="module")
def graph() -> import_graph.Graph:
    return import_graph.read(packages=("bench",))


def test_the_harness_imports_no_other_bench_module(graph):
    assert graph.module_edges().get("bench.harness", set()) == set()


def test_no_circle_between_bench_modules(graph):
    assert cycles(graph.module_edges()) == []


@pytest.mark.parametrize("script", ON_THE_HARNESS)
def test_the_script_uses_the_harness_for_servers_databases_and_load(script):
    source = (ROOT / "bench" / script).read_text()
    assert "bench.harness import" in source
    assert [text for text in OWN_MACHINERY if text in source] == []
