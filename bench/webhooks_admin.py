"""Admin pages at 100,000 deliveries (issue 8, point 7) and the delivery health board at
1,000,000 (issue 22, point 5): time and query count of the delivery changelist (default order:
dead letters first), filtered lists, a delivery page and the board (all endpoints, one
workspace, one endpoint). Deliveries are spread evenly over the last `--days` days (30: the
retention window; 1: every row inside the board's 24 hours, its worst case), each with one
attempt (`--no-attempts` for none).

    CONNECT_DEVELOPMENT=1 .venv/bin/python bench/webhooks_admin.py [--db sqlite|postgres] [--deliveries N]
        [--days D] [--no-attempts]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--deliveries", type=int, default=100_000)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--no-attempts", action="store_true")
    args = parser.parse_args()
    if args.db == "sqlite":
        path = ROOT / "bench" / "data" / os.environ.get("BENCH_SQLITE_NAME", "webhooks_admin.sqlite3")
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    else:
        name = os.environ.get("BENCH_PG_NAME", "connect_webhooks_admin")
        for sql in (f"drop database if exists {name}", f"create database {name}"):
            subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql], check=True)
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from apps.tenancy import services as tenancy
    from apps.webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint

    call_command("migrate", verbosity=0)
    workspace = tenancy.create_workspace(slug="admin-bench")
    member = tenancy.add_member(workspace=workspace, email="staff@example.com", staff=True)
    now = timezone.now()
    endpoints = [
        WebhookEndpoint.objects.create(workspace=workspace, name=f"hook {i}", url=f"https://h{i}.example.com/",
                                       filters=[{"type": "session.created"}], created_at=now, updated_at=now,
                                       created_by=member, credential_kind="api_key", credential_id="x")
        for i in range(10)
    ]
    statuses = ["succeeded"] * 90 + ["dead_letter"] * 5 + ["retrying"] * 3 + ["cancelled"] * 2
    step = args.days * 86_400 / args.deliveries  # seconds between two deliveries
    started = time.perf_counter()
    for chunk in range(0, args.deliveries, 20_000):
        rows, attempts = [], []
        for i in range(chunk, min(chunk + 20_000, args.deliveries)):
            status = statuses[i % 100]
            terminal = status not in ("retrying",)
            created = now - timezone.timedelta(seconds=i * step)
            rows.append(Delivery(
                id=f"dlv_{i:010d}", workspace=workspace, endpoint=endpoints[i % 10], event_id=f"evt_{i:08d}",
                event_type="session.created" if i % 3 else "session.status_changed", body='{"id":"x"}',
                status=status, attempt_count=7 if status == "dead_letter" else 1,
                is_dead_letter=status == "dead_letter", terminal_at=now if terminal else None,
                # Half the retrying ones are due now, half in an hour.
                next_attempt_at=None if terminal else now + timezone.timedelta(hours=i % 2),
                created_at=created, updated_at=now,
            ))
            if not args.no_attempts:
                ok = status == "succeeded"
                attempts.append(DeliveryAttempt(
                    delivery_id=f"dlv_{i:010d}", number=1, started_at=created, completed_at=created,
                    http_status=200 if ok else 503, duration_ms=(i * 37) % 900 + (0 if ok else 1_500),
                    error="" if ok else "http_error",
                ))
        with transaction.atomic():  # one commit per 20,000 rows
            Delivery.objects.bulk_create(rows, batch_size=2000)
            DeliveryAttempt.objects.bulk_create(attempts, batch_size=2000)
    print(f"inserted in {time.perf_counter() - started:.0f} s")
    some = Delivery.objects.filter(status="dead_letter").order_by("-created_at").first()
    DeliveryAttempt.objects.bulk_create([
        DeliveryAttempt(delivery=some, number=n, started_at=now, completed_at=now, http_status=500, duration_ms=5,
                        error="http_error") for n in range(2, 8)
    ])
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
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


if __name__ == "__main__":
    main()
