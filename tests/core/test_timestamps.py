from datetime import datetime, timedelta, timezone

import pytest

from apps.core.timestamps import IsoMs, iso_ms, parse_iso


def test_utc_with_milliseconds_and_z():
    assert iso_ms(datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)) == "2026-01-02T03:04:05.678Z"


def test_whole_seconds_still_show_milliseconds():
    assert iso_ms(datetime(2026, 1, 1, tzinfo=timezone.utc)) == "2026-01-01T00:00:00.000Z"


def test_other_offsets_are_converted_to_utc():
    plus_five = timezone(timedelta(hours=5))
    assert iso_ms(datetime(2026, 1, 1, 5, 0, 0, 1000, tzinfo=plus_five)) == "2026-01-01T00:00:00.001Z"


def test_none_is_none():
    assert iso_ms(None) is None


def test_round_trip():
    value = datetime(2026, 6, 30, 23, 59, 59, 999000, tzinfo=timezone.utc)
    assert parse_iso(iso_ms(value)) == value


@pytest.mark.parametrize("micro", [0, 1, 999, 1000, 499999, 500000, 999999])
def test_the_database_formats_a_timestamp_as_iso_ms_does(acme, micro):
    """IsoMs (the transcript fast path's timestamps) against iso_ms, on whichever database the
    suite runs: truncated milliseconds, `Z`, whole seconds with `.000`."""
    from apps.recordings.models import Session
    from tests import factories

    value = datetime(2026, 3, 4, 5, 6, 7, micro, tzinfo=timezone.utc)
    session = factories.session(acme, at=value)
    session.refresh_from_db()
    [formatted] = Session.objects.filter(pk=session.pk).values_list(IsoMs("created_at"), flat=True)
    assert formatted == iso_ms(session.created_at) == iso_ms(value)


@pytest.mark.parametrize("micro", [0, 1, 999, 1000, 499999, 500000, 999999])
def test_stamp_read_gives_iso_ms_on_this_database(acme, micro):
    """`stamp_read` (the transcript's segment timestamps): the column as it reads it, turned
    into wire form by its converter, is iso_ms of the stored value; on SQLite the value read is
    the stored text (`+column`: no datetime converter ran), which `iso_ms_from_stored` slices."""
    from django.db import connection

    from apps.core.timestamps import stamp_read
    from apps.recordings.models import Session
    from tests import factories

    value = datetime(2026, 3, 4, 5, 6, 7, micro, tzinfo=timezone.utc)
    session = factories.session(acme, at=value)
    sql, convert = stamp_read(connection.vendor, '"created_at"')
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql} FROM {Session._meta.db_table} WHERE id = %s", [session.pk])  # noqa: S608
        [read] = cursor.fetchone()
    assert isinstance(read, str)
    assert (convert(read) if convert else read) == iso_ms(value)
    assert (convert is None) == (connection.vendor == "postgresql")


@pytest.mark.parametrize(
    "stored, wire",
    [
        ("2026-03-04 05:06:07.123456", "2026-03-04T05:06:07.123Z"),
        ("2026-03-04 05:06:07.000999", "2026-03-04T05:06:07.000Z"),
        ("2026-03-04 05:06:07", "2026-03-04T05:06:07.000Z"),
        ("2026-03-04 05:06:07.5", "2026-03-04T05:06:07.500Z"),
    ],
)
def test_iso_ms_from_stored_is_the_sqlite_expression_in_python(stored, wire):
    """The same text as `iso_ms_sql("sqlite", …)` gives for the same stored text (whole seconds,
    a short fraction), computed by SQLite itself here."""
    import sqlite3

    from apps.core.timestamps import iso_ms_from_stored, iso_ms_sql

    [(by_sqlite,)] = sqlite3.connect(":memory:").execute(f"SELECT {iso_ms_sql('sqlite', '?')}", [stored] * 3)
    assert iso_ms_from_stored(stored) == by_sqlite == wire
