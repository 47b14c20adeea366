"""The statements prepared once per PostgreSQL connection (engine/postgresql/prepared.py):
the same rows as the statement run as it is, after the connection lost its prepared statements
too, and inside a transaction."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from apps.access.credentials import KEY_LOOKUP, authenticate_bearer
from apps.tenancy.models import hash_api_key
from engine.postgresql import prepared
from tests import factories


def plain(sql: str, params: list) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def test_placeholders_are_numbered():
    assert prepared.numbered("a = %s AND b = %s") == "a = $1 AND b = $2"
    assert prepared.numbered("SELECT 1") == "SELECT 1"


@pytest.fixture
def alice_and_acme(transactional_db):
    # Outside a test transaction: inside one the statement runs unprepared.
    acme = factories.workspace("acme")
    return factories.member(acme, "alice@acme.test"), acme


def test_the_prepared_key_lookup_reads_what_the_statement_reads(alice_and_acme):
    alice, acme = alice_and_acme
    key = factories.api_key(alice, factories.ALL_SCOPES)
    sql = KEY_LOOKUP.sql()
    params = [hash_api_key(key)]
    expected = plain(sql, params)
    assert expected is not None
    assert prepared.fetchone("connect_test_lookup", sql, params) == expected
    assert prepared.fetchone("connect_test_lookup", sql, params) == expected  # now prepared
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DISCARD ALL")  # as a pooler's reset would
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            assert cursor.fetchone() == (0,)
    assert prepared.fetchone("connect_test_lookup", sql, params) == expected
    with transaction.atomic():
        assert prepared.fetchone("connect_test_lookup", sql, params) == expected
    assert prepared.fetchone("connect_test_lookup", sql, ["nothing"]) is None
    principal = authenticate_bearer(f"Bearer {key}")
    assert principal.workspace == acme and principal.credential_id == expected[0]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PREPARE: PostgreSQL")
def test_the_lookup_is_prepared_once_per_connection(alice_and_acme):
    key = factories.api_key(alice_and_acme[0], factories.ALL_SCOPES)
    prepared.fetchone("connect_test_once", KEY_LOOKUP.sql(), [hash_api_key(key)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE name = 'connect_test_once'")
        assert cursor.fetchone() == (1,)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PREPARE: PostgreSQL")
def test_a_statement_whose_columns_a_migration_changed_is_prepared_again(alice_and_acme):
    key = factories.api_key(alice_and_acme[0], factories.ALL_SCOPES)
    sql, params = KEY_LOOKUP.sql(), [hash_api_key(key)]
    expected = plain(sql, params)
    assert prepared.fetchone("connect_test_changed", sql, params) == expected
    with connection.cursor() as cursor:
        cursor.execute("SELECT data_type FROM information_schema.columns "
                       "WHERE table_name = 'tenancy_workspace' AND column_name = 'name'")
        (was,) = cursor.fetchone()
        assert was == "character varying"
        cursor.execute("SELECT character_maximum_length FROM information_schema.columns "
                       "WHERE table_name = 'tenancy_workspace' AND column_name = 'name'")
        (length,) = cursor.fetchone()
        cursor.execute("ALTER TABLE tenancy_workspace ALTER COLUMN name TYPE text")
        try:
            assert prepared.fetchone("connect_test_changed", sql, params) == plain(sql, params)
        finally:
            cursor.execute(f"ALTER TABLE tenancy_workspace ALTER COLUMN name TYPE varchar({length})")
