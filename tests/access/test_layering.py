"""The doorkeeper's place in the layers (docs/decisions/authentication.md "One doorkeeper"), read from the
source by bench/imports.py: nothing below access imports it (oauth's authorization views
excepted: they read its pure audience rules), access imports nothing above it, and no import
circle holds any of its modules."""

from __future__ import annotations

from pathlib import Path

from bench.imports import analyse, app_of

ROOT = Path(__file__).resolve().parents[2]
BELOW_ACCESS = {"core", "tenancy", "oauth"}
ABOVE_ACCESS = {"recordings", "events", "mcp", "webhooks"}


def test_nothing_below_access_imports_it_but_oauths_views():
    found = analyse(ROOT)["modules"]
    upward = sorted(
        (module, target)
        for module, targets in found.items()
        for target, _in_function in targets
        if app_of(module) in BELOW_ACCESS and app_of(target) == "access"
    )
    assert upward == [("apps.oauth.views", "apps.access.audience")]


def test_access_imports_nothing_above_it():
    found = analyse(ROOT)["modules"]
    assert not [
        (module, target)
        for module, targets in found.items()
        if app_of(module) == "access"
        for target, _ in targets
        if app_of(target) in ABOVE_ACCESS
    ]


def test_the_ground_floor_imports_no_app():
    found = analyse(ROOT)["modules"]
    assert not [(m, t) for m, targets in found.items() if app_of(m) == "core" for t, _ in targets if app_of(t) != "core"]


def test_no_circle_holds_the_doorkeeper_or_the_credential_models():
    result = analyse(ROOT)
    assert result["module_cycles"] == []
    for component in result["cycles_with_function_imports"]:
        assert not {app_of(m) for m in component} & {"access", "tenancy", "oauth"}, component


def test_the_doorkeeper_needs_no_function_level_import_of_an_app_module():
    # The OpenAPI extension is registered by the schema generator's module (connect/openapi.py).
    assert [(m, t) for m, t in analyse(ROOT)["function_level"] if app_of(m) == "access"] == []


def test_no_upward_import_and_no_circle_anywhere():
    """Across every app: only the justified upward edges (bench/imports.py ALLOWED_UPWARD), and
    no circle, not even one a function-level import would hide."""
    result = analyse(ROOT)
    assert result["upward"] == []
    assert result["cycles_with_function_imports"] == []
