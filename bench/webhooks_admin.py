"""Admin pages at 100,000 deliveries (issue 8, point 7): time and query count of the delivery
changelist (default order: dead letters first), filtered lists and a delivery page.

    CONNECT_DEVELOPMENT=1 .venv/bin/python bench/webhooks_admin.py [--db sqlite|postgres] [--deliveries N]
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
    args = parser.parse_args()
    if args.db == "sqlite":
        path = ROOT / "bench" / "data" / "webhooks_admin.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    else:
        for sql in ("drop database if exists connect_webhooks_admin", "create database connect_webhooks_admin"):
            subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql], check=True)
        os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/connect_webhooks_admin"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
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
    rows = []
    for i in range(args.deliveries):
        status = statuses[i % 100]
        terminal = status not in ("retrying",)
        rows.append(Delivery(
            workspace=workspace, endpoint=endpoints[i % 10], event_id=f"evt_{i:08d}",
            event_type="session.created" if i % 3 else "session.status_changed", body='{"id":"x"}',
            status=status, attempt_count=7 if status == "dead_letter" else 1, is_dead_letter=status == "dead_letter",
            terminal_at=now if terminal else None, next_attempt_at=None if terminal else now,
            created_at=now - timezone.timedelta(seconds=i), updated_at=now,
        ))
    Delivery.objects.bulk_create(rows, batch_size=2000)
    some = Delivery.objects.filter(status="dead_letter").order_by("-created_at").first()
    DeliveryAttempt.objects.bulk_create([
        DeliveryAttempt(delivery=some, number=n, started_at=now, completed_at=now, http_status=500, duration_ms=5,
                        error="http_error") for n in range(1, 8)
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
    }
    print(f"{connection.vendor}, {Delivery.objects.count()} deliveries")
    for name, url in pages.items():
        client.get(url)  # warm
        times = []
        for _ in range(5):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        print(f"  {name:34s} median {statistics.median(times):7.1f} ms  {len(queries):3d} queries")


if __name__ == "__main__":
    main()
