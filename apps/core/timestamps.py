from __future__ import annotations

from datetime import datetime, timezone

from django.db.models import CharField, Func


def iso_ms(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with milliseconds and `Z`, the one timestamp format on the wire."""
    if value is None:
        return None
    if value.tzinfo is not timezone.utc:
        value = value.astimezone(timezone.utc)
    return value.isoformat(timespec="milliseconds")[:-6] + "Z"  # "+00:00" → "Z"


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class IsoMs(Func):
    """A timestamp column as `iso_ms` writes it, formatted by the database: a query that reads
    many rows for the wire (the transcript fast path) skips a datetime object and its
    formatting per row. Milliseconds are truncated, as `isoformat(timespec="milliseconds")`
    does (tests/core/test_timestamps.py compares the two on both databases)."""

    output_field = CharField()
    arity = 1

    def as_sql(self, compiler, connection, **extra_context):
        raise NotImplementedError(f"IsoMs has no SQL for {connection.vendor}")

    def as_sqlite(self, compiler, connection, **extra_context):
        # Django stores an aware datetime as naive UTC text, `YYYY-MM-DD HH:MM:SS[.ffffff]`.
        sql, params = compiler.compile(self.source_expressions[0])
        wire = (
            f"(substr({sql}, 1, 10) || 'T' || substr({sql}, 12, 8) || '.' || "
            f"substr(substr({sql}, 21) || '000', 1, 3) || 'Z')"
        )
        return wire, (*params, *params, *params)

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return f"""to_char({sql} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')""", params
