"""Benchmark settings: production settings plus the bare-Django reference view (bench/urls.py).

Serve with `DJANGO_SETTINGS_MODULE=bench.settings python manage.py serve --workers 2`, exactly
like production; nothing else differs (same middleware, database options, daphne processes).
"""

from connect.settings import *  # noqa: F401,F403

ROOT_URLCONF = "bench.urls"

import os  # noqa: E402

# The `postgres-pool` variant of bench/rest.py: the same app with psycopg's connection pool
# (Django ≥ 5.1) instead of CONN_MAX_AGE persistent connections. Under ASGI every request runs
# its sync code in a thread of its own (Django's handler opens a ThreadSensitiveContext per
# request), so a persistent connection is opened per request and left to the garbage
# collector; the pool lends one per request and takes it back when Django closes it.
if os.environ.get("BENCH_DB_POOL") == "1" and DATABASES["default"]["ENGINE"].endswith("postgresql"):  # noqa: F405
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {  # noqa: F405
        "min_size": 4,
        "max_size": 16,
        "timeout": 10,
    }

# The stock-handler variant: Django's own ASGIHandler instead of production's
# LaneASGIHandler, everything else equal (bench/asgi_stock.py).
if os.environ.get("BENCH_STOCK_HANDLER") == "1":
    ASGI_APPLICATION = "bench.asgi_stock.application"
    # A thread per request: a kept SQLite connection would be one per request, never reused.
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405

# The unprepared variant (bench/mechanisms.py): every statement of engine/postgresql/prepared.py
# sent as it is, planned on each run, as Django sends every other query.
if os.environ.get("BENCH_UNPREPARED") == "1":
    from engine.postgresql import prepared as _prepared

    _prepared.run = lambda cursor, name, sql, params: cursor.execute(sql, params)

# The variant without `gc.freeze` at start-up (bench/sse.py --head-env): engine/daphne_worker.py
# calls it once the reactor runs, after these settings are loaded.
if os.environ.get("BENCH_NO_GC_FREEZE") == "1":
    import gc as _gc

    _gc.freeze = lambda: None

# The variant without the write-through (bench/sse.py --head-env): every stream frame goes
# through twisted.web's `Request.write`, as engine/daphne_stream.py does for a transport it
# cannot see into.
if os.environ.get("BENCH_NO_WRITE_THROUGH") == "1":
    from engine import daphne_stream as _daphne_stream

    _daphne_stream.can_write_through = lambda transport: False

# The loop probe (bench/loop_probe.py): in each daphne server process (the settings load in
# daphne's command line, after it installed its reactor), what holds the event loop.
if os.environ.get("BENCH_LOOP_PROBE"):
    import sys as _sys

    if "daphne.cli" in _sys.modules:
        from bench import loop_probe as _loop_probe

        _loop_probe.install(os.environ["BENCH_LOOP_PROBE"])

# Interpreter knobs for a diagnosis A/B in one checkout (bench/ingest.py --server-env): the GIL's
# switch interval (seconds) and the collector's thresholds ("700,10,10").
if os.environ.get("BENCH_SWITCH_INTERVAL"):
    import sys as _sys

    _sys.setswitchinterval(float(os.environ["BENCH_SWITCH_INTERVAL"]))
if os.environ.get("BENCH_GC_THRESHOLD"):
    import gc as _gc

    _gc.set_threshold(*(int(x) for x in os.environ["BENCH_GC_THRESHOLD"].split(",")))

# Variants of production code for an A/B in one checkout (bench/variants.py).
if os.environ.get("BENCH_CLAIM_SQL"):
    INSTALLED_APPS = [*INSTALLED_APPS, "bench.variants.BenchVariants"]  # noqa: F405
