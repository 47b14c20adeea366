"""The pure parts of issue 22: request ids, traceparent, the log formats, and the counters the
doorkeeper and the MCP core write (single-process registry: this test process's own)."""

from __future__ import annotations

import json
import logging
import logging.config
import sys

import pytest
from prometheus_client import REGISTRY

from apps.access.admission import admit
from apps.core import context
from apps.core.errors import NotFound, Unauthorized
from apps.core.logs import AsWarningLine, ContextFilter, TextFormatter, logging_config
from connect.scrape import scrape_allowed
from tests.servers import UNTURNING_WINDOW_SECONDS, forget_rate_limit_counts

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize("inbound", ["a", "A-b_c.9", "x" * 128, "req_0123"])
def test_well_formed_ids_are_kept(inbound):
    assert context.request_id_from(inbound) == inbound


@pytest.mark.parametrize("inbound", [None, "", "x" * 129, "a b", "a/b", "ü", "a\nb", "a;b", "a\x00"])
def test_anything_else_gets_a_fresh_id(inbound):
    fresh = context.request_id_from(inbound)
    assert fresh != inbound and context.REQUEST_ID.fullmatch(fresh) and fresh.startswith("req_")


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        (TRACEPARENT, True),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),  # all-zero trace id
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),  # all-zero parent id
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", False),  # upper case
        (TRACEPARENT + "x", False),
        (TRACEPARENT[:-1], False),
        (42, False),
        (None, False),
    ],
)
def test_traceparent_is_kept_only_when_well_formed(value, kept):
    assert (context.valid_traceparent(value) is not None) is kept


def in_request(request_id: str = "req_test"):
    request = context.RequestContext(request_id)
    return request, context.current.set(request)


def test_error_bodies_carry_the_request_id_only_inside_a_request():
    assert Unauthorized().body() == {"error": "unauthorized"}
    request, token = in_request("req_abc")
    try:
        assert NotFound(detail="x: y").body() == {"error": "not_found", "detail": "x: y", "requestId": "req_abc"}
    finally:
        context.current.reset(token)


def record(message: str = "hello", **extra) -> logging.LogRecord:
    line = logging.LogRecord("connect.test", logging.INFO, __file__, 1, message, (), None)
    line.__dict__.update(extra)
    return line


def test_context_filter_adds_the_ids_of_the_request_in_hand():
    request, token = in_request("req_f")
    try:
        request.traceparent, request.workspace_id, request.credential_id = TRACEPARENT, "ws_1", "key_1"
        line = record()
        ContextFilter().filter(line)
    finally:
        context.current.reset(token)
    assert (line.request_id, line.traceparent, line.workspace_id, line.credential_id) == (
        "req_f", TRACEPARENT, "ws_1", "key_1")
    outside = record()
    ContextFilter().filter(outside)
    assert not hasattr(outside, "request_id")


def test_json_format_is_one_object_per_line_with_the_fields():
    config = logging_config("json", "INFO")
    formatter = logging.config.DictConfigurator(config).configure_formatter(config["formatters"]["json"])
    line = json.loads(formatter.format(record("GET x 200", route="api/v1/x", status=200, request_id="req_1")))
    assert (line["message"], line["route"], line["status"], line["request_id"], line["level"], line["logger"]) == (
        "GET x 200", "api/v1/x", 200, "req_1", "INFO", "connect.test")


def test_text_format_appends_the_fields_it_has():
    text = TextFormatter("%(levelname)s %(message)s").format(record("opened", request_id="req_2", status=200))
    assert text == "INFO opened status=200 request_id=req_2"


@pytest.mark.parametrize("log_format", ["json", "text"])
@pytest.mark.parametrize("encoder", ["orjson", "json"])
def test_a_disallowed_host_is_one_warning_line_in_either_format(log_format, encoder):
    """Django logs it at ERROR with the exception's traceback; the logger's filter makes it one
    WARNING line (the live check: tests/obs/test_serve_logs.py)."""
    config = logging_config(log_format, "INFO", encoder=encoder)
    assert config["loggers"]["django.security.DisallowedHost"]["filters"] == ["as_warning_line"]
    assert config["filters"]["as_warning_line"]["()"] == "apps.core.logs.AsWarningLine"
    formatter = logging.config.DictConfigurator(config).configure_formatter(config["formatters"][log_format])
    try:
        raise ValueError("Invalid HTTP_HOST header: 'evil.example'.")
    except ValueError:
        exc_info = sys.exc_info()
    line = logging.LogRecord("django.security.DisallowedHost", logging.ERROR, __file__, 1, "Invalid host", (), exc_info)
    assert AsWarningLine().filter(line)
    text = formatter.format(line)
    assert "\n" not in text and "Traceback" not in text and "WARNING" in text and "ERROR" not in text


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="CONNECT_LOG_FORMAT"):
        logging_config("xml", "INFO")


@pytest.mark.parametrize(
    ("header", "allowed"),
    [("Bearer s3cret", True), ("bearer s3cret", True), ("Bearer s3cre", False), ("Bearer s3cretx", False),
     ("Basic s3cret", False), ("", False), (None, False), ("Bearer", False)],
)  # fmt: skip
def test_scrape_token_is_compared_whole(header, allowed):
    assert scrape_allowed(header, "s3cret") is allowed


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_rate_limit_refusal_is_counted(db, alice_key, settings):
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 1
    settings.CONNECT_RATE_LIMIT_WINDOW_SECONDS = int(UNTURNING_WINDOW_SECONDS)
    before = sample("connect_rate_limit_refusals_total")
    try:
        assert admit(f"Bearer {alice_key}", audiences=["http://testserver"]).error is None
        assert admit(f"Bearer {alice_key}", audiences=["http://testserver"]).error.code == "rate_limited"
    finally:
        forget_rate_limit_counts()
    assert sample("connect_rate_limit_refusals_total") == before + 1


def test_admission_notes_the_credential_by_id_never_its_value(db, alice_key):
    request, token = in_request()
    try:
        admission = admit(f"Bearer {alice_key}", audiences=["http://testserver"])
    finally:
        context.current.reset(token)
    assert request.credential_id == admission.principal.credential_id != alice_key
    assert request.workspace_id == str(admission.principal.workspace.id)


class OneTool:
    def knows(self, name: str) -> bool:
        return name == "get_session"


def test_an_mcp_call_rides_on_its_access_line_and_a_batch_s_next_call_gets_its_own(caplog):
    from apps.mcp.protocol import observe_call

    request, token = in_request("req_batch")
    try:
        with caplog.at_level(logging.INFO, logger="connect.mcp"):
            observe_call("tools/call", {"name": "get_session"}, OneTool(), {"isError": True})
            observe_call("tools/list", {}, OneTool(), {"tools": []})
    finally:
        context.current.reset(token)
    assert request.mcp_call == ("tools/call", "get_session", True)
    [line] = [r for r in caplog.records if r.name == "connect.mcp"]
    assert (line.mcp_method, line.tool, line.is_error) == ("tools/list", None, False)


def test_an_mcp_2026_request_s_meta_traceparent_joins_the_log_context():
    from apps.mcp import protocol

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        protocol.META_VERSION: protocol.MODERN_VERSION, "traceparent": TRACEPARENT}}}).encode()  # fmt: skip
    request, token = in_request()
    try:
        protocol.respond({"mcp-protocol-version": protocol.MODERN_VERSION}, body, OneTool())
        assert request.traceparent == TRACEPARENT
        malformed = body.replace(TRACEPARENT.encode(), b"00-nope")
        request.traceparent = None
        protocol.respond({"mcp-protocol-version": protocol.MODERN_VERSION}, malformed, OneTool())
        assert request.traceparent is None
    finally:
        context.current.reset(token)
