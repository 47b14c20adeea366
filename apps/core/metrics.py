"""Prometheus metrics (the official prometheus-client), declared once here; pure (no Django), so
the MCP protocol core records its calls too. The scrape is connect/scrape.py.

Multiprocess mode: `serve` points PROMETHEUS_MULTIPROC_DIR at a directory of its own before it
starts its daphne processes and the task cluster (engine/serve.py), so every process —
each daphne, each django-q2 worker forked by the sentinel — writes its values to its own files
there, and one scrape of any daphne process sums them all. Counters of a process that died stay
counted (its files stay); its live gauges (open streams) are dropped when `serve` restarts it.
Without PROMETHEUS_MULTIPROC_DIR (tests in one process, `runserver`) the metrics are the
process's own.
"""

from __future__ import annotations

import os

# Before prometheus-client's first import reads it: a directory that does not exist yet (the
# first process of a `serve` creates it) would fail every metric's creation.
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)

from prometheus_client import Counter, Gauge, Histogram  # noqa: E402

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Request latency: from 1 ms (a cached read) to the 10 s request timeout and past it.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Webhook attempts are bounded by CONNECT_WEBHOOK_TIMEOUT_SECONDS (10 s by default).
ATTEMPT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

REQUESTS = Counter(
    "connect_http_requests", "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
)  # fmt: skip
REQUEST_SECONDS = Histogram(
    "connect_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response, by route template (search is the "
    "route api/v1/transcripts/search; a stream counts its whole life).",
    ["route"], buckets=LATENCY_BUCKETS,
)  # fmt: skip
OPEN_STREAMS = Gauge("connect_sse_open_streams", "Event streams open now.", multiprocess_mode="livesum")
STREAM_CLOSES = Counter("connect_sse_disconnects", "Event streams ended, by reason.", ["reason"])
EVENTS_FANNED_OUT = Counter("connect_sse_events_fanned_out", "Live event frames handed to open streams.")
WEBHOOK_ATTEMPTS = Counter(
    "connect_webhook_attempts", "Webhook delivery attempts, by outcome (succeeded or the error kind).", ["outcome"]
)
WEBHOOK_ATTEMPT_SECONDS = Histogram(
    "connect_webhook_attempt_duration_seconds", "Duration of webhook delivery attempts.", buckets=ATTEMPT_BUCKETS
)
DEAD_LETTERS = Counter("connect_webhook_dead_letters", "Deliveries that became dead letters.")
RATE_LIMITED = Counter("connect_rate_limit_refusals", "Requests refused by the rate limit (429 rate_limited).")
MCP_CALLS = Counter(
    "connect_mcp_calls", "MCP requests by JSON-RPC method, tool (tools/call) and whether they failed.",
    ["method", "tool", "error"],
)  # fmt: skip
SEMANTIC_QUERY_VECTORS = Counter(
    "connect_semantic_query_vectors", "Question vectors a search by meaning asked for (cached or computed)."
)
SEMANTIC_QUERY_VECTORS_COMPUTED = Counter(
    "connect_semantic_query_vectors_computed",
    "Question vectors the model computed (not in the process's cache): 1 - computed / asked is the hit rate.",
)

# The labelled children of the request metrics, looked up once per label set (the set is small:
# route templates × methods × statuses), not on every request.
_request_children: dict[tuple[str, str, int], tuple] = {}  # keyed by labels only: bounded


def record_request(route: str, method: str, status: int, seconds: float) -> None:
    method = method if method in METHODS else "other"  # a client cannot add label values
    children = _request_children.get((route, method, status))
    if children is None:
        children = (REQUESTS.labels(route, method, str(status)), REQUEST_SECONDS.labels(route))
        _request_children[(route, method, status)] = children
    children[0].inc()
    children[1].observe(seconds)


