"""Admin pages at 100,000 deliveries (issue 8, point 7) and the delivery health board at
1,000,000 (issue 22, point 5): time and query count of the delivery changelist (default order:
dead letters first), filtered lists, a delivery page and the board (all endpoints, one
workspace, one endpoint). Deliveries are spread evenly over the last `--days` days (30: the
retention window; 1: every row inside the board's 24 hours, its worst case), each with one
attempt (`--no-attempts` for none).

    CONNECT_DEVELOPMENT=1 .venv/bin/python bench/webhooks_admin.py [--db sqlite|postgres] [--deliveries N]
        [--days D] [--no-attempts] [--seed-only [--migrate-to MIGRATION]] [--reuse [--code DIR]] [--explain]

Rows are written with COPY (PostgreSQL) or one executemany per 20,000 (SQLite), each row's
values prepared by the model's own fields as the ORM would write them; columns the database
does not have yet (`--migrate-to` an older migration) are left out. `--seed-only` stops after
seeding (run it outside the bench lock); `--reuse` measures an existing database after running
its pending migrations (timed: migration 0006's backfill at 1M rows) and VACUUM ANALYZE;
`--code DIR` imports the application from another checkout (a baseline worktree), so the same
data is measured before and after a change; `--explain` prints EXPLAIN ANALYZE of each query
the board runs on the attempts table. The databases are the harness's (bench/harness.py: the
SQLite file under bench/data/, the PostgreSQL database made afresh).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import DATA, ROOT, recreate_postgres_database, setup_django  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--deliveries", type=int, default=100_000)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--no-attempts", action="store_true")
    parser.add_argument("--seed-only", action="store_true", help="create and seed the database, then stop")
    parser.add_argument("--migrate-to", metavar="MIGRATION", help="seed at this webhooks migration (e.g. 0005)")
    parser.add_argument("--reuse", action="store_true", help="measure the database seeded before")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout to import the application from")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE the board's attempts queries")
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    os.chdir(args.code)
    if args.db == "sqlite":
        path = DATA / os.environ.get("BENCH_SQLITE_NAME", "webhooks_admin.sqlite3")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not args.reuse:
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    else:
        name = os.environ.get("BENCH_PG_NAME", "connect_webhooks_admin")
        if not args.reuse:
            recreate_postgres_database(name)
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    setup_django(ALLOWED_HOSTS="testserver")
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from apps.tenancy.models import Membership
    from apps.webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint

    print(f"application from {args.code.resolve()}")
    now = timezone.now()
    if args.reuse:
        started = time.perf_counter()
        call_command("migrate", verbosity=1)
        print(f"migrate: {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        vacuum_analyze(connection)
        print(f"vacuum/analyze: {time.perf_counter() - started:.1f} s")
        member = Membership.objects.select_related("user", "workspace").get(user__email="staff@example.com")
        workspace = member.workspace
        endpoints = list(WebhookEndpoint.objects.filter(workspace=workspace).order_by("name"))
        endpoints.sort(key=lambda e: int(e.name.split()[-1]))
    else:
        if args.migrate_to:
            call_command("migrate", verbosity=0)  # every app, then webhooks back to the given migration
            call_command("migrate", "webhooks", args.migrate_to, verbosity=0)
        else:
            call_command("migrate", verbosity=0)
        workspace, member, endpoints = seed(args, now)
        if args.seed_only:
            return
    some = Delivery.objects.filter(status="dead_letter").order_by("-created_at").only("id").first()
    client = Client()
    client.force_login(member.user)
    pages = {
        "changelist (dead letters first)": "/admin/webhooks/delivery/",
        "status=dead_letter": "/admin/webhooks/delivery/?status__exact=dead_letter",
        "event type": "/admin/webhooks/delivery/?event_type=session.status_changed",
        "endpoint": f"/admin/webhooks/delivery/?endpoint__id__exact={endpoints[3].id}",
        "workspace": f"/admin/webhooks/delivery/?workspace__id__exact={workspace.id}",
        "date (past 7 days)": "/admin/webhooks/delivery/?created_at__gte="
                              + (now - timezone.timedelta(days=7)).strftime("%Y-%m-%d+00:00:00%%2B00:00"),
        "page 50": "/admin/webhooks/delivery/?p=50",
        "delivery with attempts": f"/admin/webhooks/delivery/{some.id}/change/",
        "health board (10 endpoints)": "/admin/webhooks/delivery/health/",
        "health board, workspace": f"/admin/webhooks/delivery/health/?workspace={workspace.id}",
        "health board, one endpoint": f"/admin/webhooks/delivery/health/?endpoint={endpoints[3].id}",
    }
    day = Delivery.objects.filter(created_at__gte=now - timezone.timedelta(hours=24)).count()
    print(f"{connection.vendor}, {Delivery.objects.count()} deliveries ({day} in the last 24 h), "
          f"{DeliveryAttempt.objects.count()} attempts")
    for name, url in pages.items():
        client.get(url)  # warm
        times, sql_times = [], []
        for _ in range(5):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (url, response.status_code)
            sql_times.append(sum(float(q["time"]) for q in queries.captured_queries) * 1000)
        print(f"  {name:34s} median {statistics.median(times):7.1f} ms  {len(queries):3d} queries"
              f"  (SQL {statistics.median(sql_times):7.1f} ms)")
        if args.explain and name.startswith("health board (10"):
            explain([q["sql"] for q in queries.captured_queries if 'FROM "webhooks_deliveryattempt"' in q["sql"]],
                    connection)


def vacuum_analyze(connection) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")  # autocommit: outside any transaction
    else:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def explain(queries: list[str], connection) -> None:
    for sql in queries:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            else:
                cursor.execute("EXPLAIN QUERY PLAN " + sql)
            plan = [row[-1] for row in cursor.fetchall()]
        print(f"    EXPLAIN {sql[:110]}…")
        for line in plan:
            print(f"      {line}")


def seed(args, now):
    from django.db import connection, transaction
    from django.utils import timezone

    from apps.tenancy import services as tenancy
    from apps.webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint

    workspace = tenancy.create_workspace(slug="admin-bench")
    member = tenancy.add_member(workspace=workspace, email="staff@example.com", staff=True)
    endpoints = [
        WebhookEndpoint.objects.create(workspace=workspace, name=f"hook {i}", url=f"https://h{i}.example.com/",
                                       filters=[{"type": "session.created"}], created_at=now, updated_at=now,
                                       created_by=member, credential_kind="api_key", credential_id="x")
        for i in range(10)
    ]
    statuses = ["succeeded"] * 90 + ["dead_letter"] * 5 + ["retrying"] * 3 + ["cancelled"] * 2
    step = args.days * 86_400 / args.deliveries  # seconds between two deliveries
    deliveries, attempts = Writer(Delivery, connection), Writer(DeliveryAttempt, connection)
    started = time.perf_counter()
    next_id = 1
    for chunk in range(0, args.deliveries, 20_000):
        rows, tries = [], []
        for i in range(chunk, min(chunk + 20_000, args.deliveries)):
            status = statuses[i % 100]
            terminal = status not in ("retrying",)
            created = now - timezone.timedelta(seconds=i * step)
            endpoint = endpoints[i % 10]
            rows.append(deliveries.row(
                id=f"dlv_{i:010d}", workspace_id=workspace.id, endpoint_id=endpoint.id, event_id=f"evt_{i:08d}",
                event_type="session.created" if i % 3 else "session.status_changed", body='{"id":"x"}',
                status=status, attempt_count=7 if status == "dead_letter" else 1,
                is_dead_letter=status == "dead_letter", terminal_at=now if terminal else None,
                # Half the retrying ones are due now, half in an hour.
                next_attempt_at=None if terminal else now + timezone.timedelta(hours=i % 2),
                created_at=created, updated_at=now,
            ))
            if not args.no_attempts:
                ok = status == "succeeded"
                tries.append(attempts.row(
                    id=next_id, delivery_id=f"dlv_{i:010d}", endpoint_id=endpoint.id, number=1, started_at=created,
                    completed_at=created, http_status=200 if ok else 503,
                    duration_ms=(i * 37) % 900 + (0 if ok else 1_500), error="" if ok else "http_error",
                ))
                next_id += 1
        with transaction.atomic():  # one commit per 20,000 deliveries
            deliveries.write(rows)
            attempts.write(tries)
    some = Delivery.objects.filter(status="dead_letter").order_by("-created_at").only("id", "endpoint_id").first()
    with transaction.atomic():
        attempts.write([
            attempts.row(id=next_id + n, delivery_id=some.id, endpoint_id=some.endpoint_id, number=n,
                            started_at=now, completed_at=now, http_status=500, duration_ms=5, error="http_error")
            for n in range(2, 8)
        ])
    attempts.restart_sequence(next_id + 8)
    print(f"inserted in {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    vacuum_analyze(connection)
    print(f"vacuum/analyze: {time.perf_counter() - started:.0f} s")
    return workspace, member, endpoints


class Writer:
    """Rows of one model as the ORM would write them (its defaults, each field's database value),
    in bulk: COPY on PostgreSQL, executemany on SQLite. Only the columns the table has."""

    def __init__(self, model, connection) -> None:
        self.model, self.connection = model, connection
        with connection.cursor() as cursor:
            present = {c.name for c in connection.introspection.get_table_description(cursor, model._meta.db_table)}
        self.fields = [f for f in model._meta.concrete_fields if f.column in present]
        self.table = connection.ops.quote_name(model._meta.db_table)
        self.columns = ", ".join(connection.ops.quote_name(f.column) for f in self.fields)
        self.prepare = [(f.attname, self.converter(f)) for f in self.fields]

    def converter(self, field):
        """What `field.get_db_prep_save` does, without its per-call overhead for the plain
        types (a fifth of a second per thousand rows otherwise): the value as it is, or a
        datetime as Django writes it on SQLite (UTC, naive, `str`)."""
        from datetime import timezone as dt_timezone

        from django.db import models

        if isinstance(field, models.DateTimeField) and self.connection.vendor == "sqlite":
            return lambda v: None if v is None else str(v.astimezone(dt_timezone.utc).replace(tzinfo=None))
        plain = (models.CharField, models.TextField, models.IntegerField, models.BooleanField, models.AutoField,
                 models.DateTimeField, models.FloatField)
        if isinstance(field, plain) or (field.is_relation and isinstance(field.target_field, plain)):
            return None
        return lambda v: field.get_db_prep_save(v, self.connection)

    def row(self, **values) -> tuple:
        """One row's values: the model's defaults (taken once from an unsaved instance), then these."""
        if not hasattr(self, "defaults"):
            self.defaults = {f.attname: f.get_default() for f in self.fields}
        d = {**self.defaults, **values}
        return tuple(d[name] if convert is None else convert(d[name]) for name, convert in self.prepare)

    def write(self, objs) -> None:
        if not objs:
            return
        with self.connection.cursor() as cursor:
            if self.connection.vendor == "postgresql":
                with cursor.cursor.copy(f"COPY {self.table} ({self.columns}) FROM STDIN") as copy:
                    for row in objs:
                        copy.write_row(row)
            else:
                marks = ", ".join("?" * len(self.fields))
                cursor.cursor.executemany(f"INSERT INTO {self.table} ({self.columns}) VALUES ({marks})",
                                          objs)

    def restart_sequence(self, value: int) -> None:
        """Ids were given explicitly: the table's own sequence goes on after them."""
        if self.connection.vendor == "postgresql":
            with self.connection.cursor() as cursor:
                cursor.execute(f"SELECT setval(pg_get_serial_sequence('{self.model._meta.db_table}', 'id'), %s)",
                               [value])


if __name__ == "__main__":
    main()
