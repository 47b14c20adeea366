from __future__ import annotations

from collections.abc import Callable
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
        sql, params = compiler.compile(self.source_expressions[0])
        return iso_ms_sql("sqlite", sql), params * 3

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return iso_ms_sql("postgresql", sql), params


def iso_ms_sql(vendor: str, column: str) -> str:
    """IsoMs's SQL for a column (SQLite reads it three times): for queries written by hand."""
    if vendor == "sqlite":
        # Django stores an aware datetime as naive UTC text, `YYYY-MM-DD HH:MM:SS[.ffffff]`.
        return (
            f"(substr({column}, 1, 10) || 'T' || substr({column}, 12, 8) || '.' || "
            f"substr(substr({column}, 21) || '000', 1, 3) || 'Z')"
        )
    if vendor == "postgresql":
        return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""
    raise NotImplementedError(f"IsoMs has no SQL for {vendor}")


def iso_us_sql(vendor: str, column: str) -> str:
    """A timestamp column as `datetime.isoformat()` writes an aware UTC value, to the
    microsecond (`+00:00`): an exact keyset key read without a datetime object
    (apps/recordings/selectors.py `sessions_page`). `parse_iso` reads it back; PostgreSQL
    always writes six fraction digits, SQLite what Django stored (none for a whole second)."""
    if vendor == "sqlite":
        return f"(replace({column}, ' ', 'T') || '+00:00')"
    if vendor == "postgresql":
        return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""
    raise NotImplementedError(f"iso_us_sql has no SQL for {vendor}")


def iso_ms_from_stored(stored: str) -> str:
    """`iso_ms` of a UTC timestamp from its text `YYYY-MM-DD HH:MM:SS[.f…]`: as Django stores it in
    SQLite, and as PostgreSQL writes a `timestamp` in its ISO DateStyle (fraction digits to six,
    trailing zeros dropped). What `iso_ms_sql("sqlite", …)` computes, sliced in Python. A plain
    function, the common text (six fraction digits) first: the row encoder calls it once per
    segment."""
    if len(stored) == 26:
        return f"{stored[:10]}T{stored[11:23]}Z"
    return f"{stored[:10]}T{stored[11:19]}.{(stored[20:23] + '000')[:3]}Z"


def stamp_read(vendor: str, column: str) -> tuple[str, Callable[[str], str] | None]:
    """A timestamp column read for the wire by a query written by hand, and what turns the value
    read into wire form (None: it already is). SQLite's own substr/concat costs more than slicing
    in Python, so SQLite hands over its stored text (`+column`: without the column's declared type,
    so the driver's datetime converter does not run) for the row encoder to slice
    (`iso_ms_from_stored`). On PostgreSQL the slicing would cost the server process about
    what to_char saves the database, so PostgreSQL formats (tests/core/test_timestamps.py;
    docs/decisions/transcripts.md "The transcript read, third step")."""
    if vendor == "sqlite":
        return f"+{column}", iso_ms_from_stored
    return iso_ms_sql(vendor, column), None
