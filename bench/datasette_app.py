"""Datasette as an ASGI app, so uvicorn can run it with N worker processes
(`python -m uvicorn --workers 2 bench.datasette_app:app`): the `datasette` command itself is
one process. The database file comes from BENCH_DATASETTE_DB and is opened immutable (-i),
Datasette's fastest mode (no change detection, cached table counts); the metadata (which FTS
table serves which table) from BENCH_DATASETTE_METADATA, written by bench/rest.py."""

import json
import os

from datasette.app import Datasette

_db = os.environ["BENCH_DATASETTE_DB"]
app = Datasette(
    immutables=[_db],
    metadata=json.loads(open(os.environ["BENCH_DATASETTE_METADATA"]).read()),
    settings={"suggest_facets": False, "default_page_size": 100, "max_returned_rows": 1000,
              "sql_time_limit_ms": 30000},
).app()
