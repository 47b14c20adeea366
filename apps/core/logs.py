"""Log lines that say what they belong to: `CONNECT_LOG_FORMAT=json` (one JSON object per line,
python-json-logger) or `text` (the default). Every record written while a request, stream or
tool call is in hand carries its ids (`request_id`, `traceparent`, `workspace_id`,
`credential_id`) from apps/core/context.py; lines written with `extra=` (the access line, a
stream's close, a webhook attempt) carry their fields too. No formatter prints a secret: the
ids are the credential's id, never its value.
"""

from __future__ import annotations

import logging
import logging.config
from typing import Any

from apps.core import context

CONTEXT_FIELDS = ("request_id", "traceparent", "workspace_id", "credential_id")
# The fields lines written with `extra=` may carry, shown by the text format after the message.
EXTRA_FIELDS = (
    "method", "route", "status", "duration_ms", "bytes", "events_sent", "close_reason",
    "delivery_id", "endpoint_id", "outcome", "http_status", "error_kind", "mcp_method", "tool", "is_error",
)  # fmt: skip


class ContextFilter(logging.Filter):
    """Adds the ids of the request in hand to every record (handler filter: it sees the records
    of every logger, Django's, daphne's and django-q2's included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = context.get()
        if current is not None:
            for name in CONTEXT_FIELDS:
                if getattr(record, name, None) is None:
                    setattr(record, name, getattr(current, name))
        return True


class TextFormatter(logging.Formatter):
    """`time level logger message key=value …`: the message, then the ids and fields it has."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs = [
            f"{name}={value}"
            for name in (*EXTRA_FIELDS, *CONTEXT_FIELDS)
            if (value := getattr(record, name, None)) is not None
        ]
        if not pairs:
            return line
        head, newline, rest = line.partition("\n")  # a traceback stays below its line
        return f"{head} {' '.join(pairs)}{newline}{rest}"


class AsWarningLine(logging.Filter):
    """Lowers a record to one WARNING line without its traceback (logger filter). Django logs a
    request with a disallowed Host at ERROR with a traceback: the client's mistake, answered
    `400 invalid_request`, not a failure of ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info = record.exc_text = record.stack_info = None
        return True


# python-json-logger's orjson flavour is a third cheaper a line than its json one; `serve`'s
# supervising process, which imports no orjson, writes its few lines with the json one.
JSON_FORMATTERS = {"orjson": "pythonjsonlogger.orjson.OrjsonFormatter", "json": "pythonjsonlogger.json.JsonFormatter"}


def logging_config(log_format: str, level: str, *, encoder: str = "orjson") -> dict[str, Any]:
    if log_format not in ("json", "text"):
        raise ValueError(f"CONNECT_LOG_FORMAT must be json or text, not {log_format!r}")
    formatters = {
        "json": {
            "()": JSON_FORMATTERS[encoder],
            "fmt": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
        "text": {"()": "apps.core.logs.TextFormatter", "format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "context": {"()": "apps.core.logs.ContextFilter"},
            "as_warning_line": {"()": "apps.core.logs.AsWarningLine"},
        },
        "formatters": {log_format: formatters[log_format]},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": log_format, "filters": ["context"]},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
            "django.security.DisallowedHost": {"filters": ["as_warning_line"]},
        },
    }


def configure(config: dict[str, Any]) -> None:
    """LOGGING_CONFIG: the dictionary config, and Python's warnings written as log records, so
    that none is printed as a bare line into a JSON log."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)
