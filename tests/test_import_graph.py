"""The house's floors, read from the source (tests/import_graph.py): the engine imports no app;
an app imports only apps below it (tests/import_graph.py APP_ORDER); no circle between apps nor
between files, function-level imports included; settings import no app module but the few
plain-data ones named here, and those touch neither Django's settings nor its models.

Each rule is a function of a graph, so the synthetic graphs at the end prove it can fail."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests import import_graph
from tests.import_graph import APP_ORDER, ROOT, Edge, Graph, app_of, cycles, graph_of, upward

# What connect/settings.py may import, and why each is safe: they are the project's policy as
# plain data (django-cors-headers' lists, django-oauth-toolkit's settings, the logging
# configuration), kept beside the code that applies them at run time, and import nothing of
# Django (test_settings_touch_neither_django_settings_nor_models proves it by running them).
SETTINGS_MAY_IMPORT = {"apps.core.cors", "apps.oauth.conf", "apps.core.logs"}


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph.read()


def engine_imports_of_apps(graph: Graph) -> list[Edge]:
    return [e for e in graph.edges if e.source.split(".")[0] == "engine" and e.target.split(".")[0] != "engine"]


def app_cycles(graph: Graph) -> list[list[str]]:
    return cycles(graph.app_edges())


def file_cycles(graph: Graph) -> list[list[str]]:
    return cycles(graph.module_edges(function_level=True))


def settings_imports(graph: Graph) -> set[str]:
    return {e.target for e in graph.edges if e.source == "connect.settings" and app_of(e.target)}


def test_the_engine_imports_no_app_and_nothing_of_the_project(graph):
    assert engine_imports_of_apps(graph) == []


def test_no_app_imports_the_project_top(graph):
    assert [e for e in graph.edges if app_of(e.source) and e.target.split(".")[0] == "connect"] == []


def test_every_app_has_its_place_in_the_order(graph):
    assert {app_of(m) for m in graph.modules if app_of(m)} <= set(APP_ORDER)


def test_no_app_imports_an_app_above_it(graph):
    assert upward(graph) == []


def test_no_circle_between_apps(graph):
    assert app_cycles(graph) == []


def test_no_circle_between_files_function_level_imports_included(graph):
    assert file_cycles(graph) == []


def test_the_doorkeeper_needs_no_function_level_import_of_an_app_module(graph):
    # The OpenAPI extension is registered by the schema generator's module (connect/openapi.py).
    assert [e for e in graph.edges if app_of(e.source) == "access" and e.in_function and app_of(e.target)] == []


def test_settings_import_only_the_plain_data_modules(graph):
    assert settings_imports(graph) <= SETTINGS_MAY_IMPORT


def test_settings_touch_neither_django_settings_nor_models():
    """In a fresh interpreter: the modules the settings may import load nothing of Django (nor
    of ours but what they import, none of which does), and importing the settings then loads
    neither Django's settings, its app registry nor its database layer (so no model)."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {sorted(SETTINGS_MAY_IMPORT)!r}: importlib.import_module(name)\n"
        "alone = sorted(m for m in sys.modules if m.split('.')[0] in ('apps', 'engine', 'django', 'rest_framework'))\n"
        "import connect.settings\n"
        "print(json.dumps([alone, sorted(sys.modules)]))"
    )
    env = {"PATH": "/usr/bin:/bin", "CONNECT_DEVELOPMENT": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    alone, with_settings = json.loads(out.stdout)
    assert set(alone) <= SETTINGS_MAY_IMPORT | {"apps", "apps.core", "apps.oauth", "apps.core.origins", "apps.core.context"}
    assert not {"django.conf", "django.apps", "django.db"} & set(with_settings)


# --- The rules can fail ----------------------------------------------------------------------


def _synthetic(*edges: tuple[str, str], in_function: tuple[str, str] | None = None) -> Graph:
    imports: dict[str, list[tuple[str, bool]]] = {}
    for source, target in edges:
        imports.setdefault(source, []).append((target, (source, target) == in_function))
        imports.setdefault(target, [])
    return graph_of(imports)


def test_a_circle_between_files_is_found_even_through_a_function_level_import():
    graph = _synthetic(("apps.core.a", "apps.core.b"), ("apps.core.b", "apps.core.c"), ("apps.core.c", "apps.core.a"),
                       in_function=("apps.core.c", "apps.core.a"))  # fmt: skip
    assert file_cycles(graph) == [["apps.core.a", "apps.core.b", "apps.core.c"]]
    assert cycles(graph.module_edges(function_level=False)) == []


def test_a_circle_between_apps_and_its_upward_arrow_are_found():
    graph = _synthetic(("apps.events.shapes", "apps.recordings.shapes"), ("apps.recordings.services", "apps.events.services"))
    assert app_cycles(graph) == [["events", "recordings"]]
    assert file_cycles(graph) == []  # no file circle: only the app-level rule sees it
    assert [(e.source, e.target) for e in upward(graph)] == [("apps.events.shapes", "apps.recordings.shapes")]


def test_an_import_between_apps_of_one_rank_is_upward():
    graph = _synthetic(("apps.stream.hub", "apps.webhooks.models"))
    assert [(e.source, e.target) for e in upward(graph)] == [("apps.stream.hub", "apps.webhooks.models")]


def test_an_engine_import_of_an_app_and_a_settings_import_are_found():
    graph = _synthetic(("engine.lanes", "apps.core.errors"), ("connect.settings", "apps.recordings.models"))
    assert [(e.source, e.target) for e in engine_imports_of_apps(graph)] == [("engine.lanes", "apps.core.errors")]
    assert not settings_imports(graph) <= SETTINGS_MAY_IMPORT


def test_relative_and_from_package_imports_resolve_to_modules():
    import ast

    tree = ast.parse("from . import models\nfrom ..core.errors import ApiError\nfrom engine import lanes\n")
    names = import_graph.imports_of(tree, "apps.events.shapes")
    assert names == [("apps.events.models", False), ("apps.core.errors.ApiError", False), ("engine.lanes", False)]
