"""The delivery health board (issue 22, point 5): its pure parts, its numbers against rows
written by hand, who may see it, its links, its fixed query count, and that its aggregates read
the indexes built for them. The page as a person sees it: tests/webhooks/test_admin_pages.py."""

from __future__ import annotations

import re
from datetime import timedelta
from itertools import count
from urllib.parse import unquote

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.tenancy.services import issue_api_key
from apps.webhooks import health
from apps.webhooks.health import (
    DURATION_BOUNDS_MS,
    duration_label,
    hour_key,
    hourly_chart,
    percentile_from_histogram,
)
from apps.webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint
from tests import factories

BOARD = "/admin/webhooks/delivery/health/"
_ids = count()


# --- pure parts -------------------------------------------------------------------------------


def bucket_of(ms: int) -> int:
    return next((i for i, bound in enumerate(DURATION_BOUNDS_MS) if ms < bound), len(DURATION_BOUNDS_MS))


def test_percentile_is_the_upper_bound_of_the_bucket_holding_the_rank():
    assert percentile_from_histogram({}, 0.5) is None
    # 100 durations: 98 of 40 ms (bucket < 50), one of 400 ms (< 500), one of 90 s (open bucket).
    counts = {bucket_of(40): 98, bucket_of(400): 1, bucket_of(90_000): 1}
    assert percentile_from_histogram(counts, 0.50) == 50
    assert percentile_from_histogram(counts, 0.99) == 500
    assert percentile_from_histogram(counts, 1.0) == -1
    # The rank is rounded up: of two durations, p50 is the first, p99 the second.
    assert percentile_from_histogram({bucket_of(1): 1, bucket_of(8): 1}, 0.5) == 2
    assert percentile_from_histogram({bucket_of(1): 1, bucket_of(8): 1}, 0.99) == 10
    assert percentile_from_histogram({bucket_of(0): 3}, 0.99) == 1


def test_bucket_bounds_grow_by_at_most_half():
    assert list(DURATION_BOUNDS_MS) == sorted(DURATION_BOUNDS_MS)
    assert all(b / a <= 1.5 for a, b in zip(DURATION_BOUNDS_MS[1:], DURATION_BOUNDS_MS[2:]))


def test_duration_labels():
    assert duration_label(None) == "-"
    assert duration_label(150) == "≤ 150 ms"
    assert duration_label(1_500) == "≤ 1.5 s"
    assert duration_label(-1) == "> 60 s"


def test_chart_stacks_outcomes_scaled_to_the_busiest_hour():
    hours = ["2026-11-25 0%d" % h for h in range(4)]
    chart = hourly_chart(hours, {hours[0]: {"succeeded": 6, "dead_letter": 2}, hours[2]: {"retrying": 4}},
                         width=400, height=80)
    assert chart.peak == 8
    first = [b for b in chart.bars if b.x == 0]
    assert [(b.color, b.height) for b in first] == [("#2e7d32", 60.0), ("#c62828", 20.0)]
    assert first[0].y == 20.0 and first[1].y == 0.0  # succeeded at the bottom, dead letters on top
    third = [b for b in chart.bars if b.x == 200]
    assert [(b.color, b.height, b.y) for b in third] == [("#f9a825", 40.0, 40.0)]
    assert not [b for b in chart.bars if b.x in (100, 300)]  # empty hours draw nothing
    assert "4 retrying" in third[0].title
    assert hourly_chart(hours, {}).bars == [] and hourly_chart(hours, {}).peak == 0


# --- rows -------------------------------------------------------------------------------------


def make_endpoint(ws, member, name="hook", **extra) -> WebhookEndpoint:
    """An endpoint whose installation holds (a live key of `member`): the board would show one
    made with a made-up credential as inactive, `installation_unauthorized`."""
    now = timezone.now()
    key = issue_api_key(membership=member, scopes=["svc:sessions:read"], name="board").api_key
    return WebhookEndpoint.objects.create(
        workspace=ws, name=name, url=f"https://{name.replace(' ', '-')}.example.com/",
        filters=[{"type": "session.created"}], created_at=now, updated_at=now, created_by=member,
        credential_kind="api_key", credential_id=str(key.pk), **extra,
    )


def delivery(endpoint, status, created_at, *, durations=(), errors=(), next_attempt_at=None) -> Delivery:
    """A delivery and its attempts (one per duration, `errors[i]` its error, "" a success)."""
    d = Delivery.objects.create(
        workspace_id=endpoint.workspace_id, endpoint=endpoint, event_id=f"evt_{next(_ids)}",
        event_type="session.created", body="{}", status=status, attempt_count=len(durations),
        is_dead_letter=status == "dead_letter", next_attempt_at=next_attempt_at,
        terminal_at=None if status in ("pending", "retrying") else created_at,
        created_at=created_at, updated_at=created_at,
    )
    for number, ms in enumerate(durations, start=1):
        error = errors[number - 1] if number <= len(errors) else ""
        started = created_at + timedelta(seconds=number)
        DeliveryAttempt.objects.create(delivery=d, number=number, started_at=started, completed_at=started,
                                       duration_ms=ms, error=error, http_status=503 if error == "http_error" else 200)
    return d


@pytest.fixture
def scene(alice, bob):
    """Two endpoints of acme with a known day, and one of globex."""
    now = timezone.now()
    hour_start = now.replace(minute=0, second=0, microsecond=0)

    def recent(minutes: int):
        """`minutes` ago, but never before this hour began: the chart's previous hour must hold
        only the six deliveries put there (a run in an hour's first minutes once found one more)."""
        return max(hour_start, now - timedelta(minutes=minutes))

    hook = make_endpoint(alice.workspace, alice, "orders hook")
    quiet = make_endpoint(alice.workspace, alice, "quiet hook")
    other = make_endpoint(bob.workspace, bob, "globex hook")
    hour_ago, two_days, eight_days, yesterday = (now - timedelta(hours=1), now - timedelta(days=2),
                                                  now - timedelta(days=8), now - timedelta(hours=25))
    for _ in range(6):
        delivery(hook, "succeeded", hour_ago, durations=[40])
    delivery(hook, "succeeded", now, durations=[900, 400], errors=["timeout"])
    dead = delivery(hook, "dead_letter", recent(5), durations=[30, 30],
                    errors=["network_error", "http_error"])
    delivery(hook, "retrying", recent(2), durations=[20], errors=["timeout"],
             next_attempt_at=now - timedelta(seconds=1))  # due
    delivery(hook, "retrying", recent(2), durations=[20], errors=["timeout"],
             next_attempt_at=now + timedelta(hours=1))  # not yet
    delivery(hook, "pending", now, next_attempt_at=now - timedelta(seconds=5))
    delivery(hook, "cancelled", now)
    # Outside the 24 hours: counted only as a dead letter of the week, or not at all.
    delivery(hook, "dead_letter", two_days, durations=[5], errors=["http_error"])
    delivery(hook, "dead_letter", eight_days, durations=[5], errors=["http_error"])
    delivery(hook, "succeeded", yesterday - timedelta(hours=1), durations=[5])
    delivery(other, "dead_letter", now, durations=[70_000], errors=["timeout"])
    return {"hook": hook, "quiet": quiet, "other": other, "dead": dead, "now": now}


# --- numbers ----------------------------------------------------------------------------------


def test_board_counts_each_endpoints_day(scene):
    board = health.board(now=scene["now"] + timedelta(seconds=2))
    rows = {r.endpoint.id: r for r in board.rows}
    hook, quiet, other = rows[scene["hook"].id], rows[scene["quiet"].id], rows[scene["other"].id]
    assert hook.by_outcome == {"succeeded": 7, "dead_letter": 1, "retrying": 2, "pending": 1, "cancelled": 1}
    assert hook.total == 12
    assert hook.success_rate == pytest.approx(7 / 8)
    assert (hook.due_now, hook.pending, hook.retrying) == (2, 1, 2)
    assert hook.dead_letters_week == 2  # now and two days ago; not eight days ago
    # 12 attempts in the window: 6×40, 900, 400, 30, 30, 20, 20 → p50 in < 50, p99 in < 1000.
    assert hook.attempts == 12
    assert (hook.p50_ms, hook.p99_ms) == (50, 1_000)
    # The last failed attempt: the dead letter's second one (http_error 503), the latest error.
    assert hook.last_error["delivery_id"] == scene["dead"].id or hook.last_error["started_at"] >= (
        scene["dead"].created_at + timedelta(seconds=2))
    by_hour_total = sum(sum(h.values()) for h in hook.by_hour.values())
    assert by_hour_total == 12
    assert hook.by_hour[hour_key(scene["now"] - timedelta(hours=1))] == {"succeeded": 6}
    assert quiet.total == 0 and quiet.attempts == 0 and quiet.last_error is None and quiet.chart.bars == []
    assert quiet.success_rate is None and quiet.p50_label == "-"
    assert other.p99_ms == -1 and other.p99_label == "> 60 s"
    assert other.last_error["error"] == "timeout"
    assert len(board.hours) == 24 and board.hours[-1] == hour_key(scene["now"] + timedelta(seconds=2))


def test_last_error_is_the_latest_failed_attempt(scene):
    hook = scene["hook"]
    late = delivery(hook, "retrying", scene["now"] + timedelta(seconds=30), durations=[10, 10],
                    errors=["", "redirect"], next_attempt_at=scene["now"] + timedelta(hours=1))
    row = health.board(endpoint_id=hook.id, now=scene["now"] + timedelta(minutes=1)).rows[0]
    assert row.last_error["delivery_id"] == late.id
    assert (row.last_error["number"], row.last_error["error"]) == (2, "redirect")


def test_filters_narrow_the_board(scene, alice):
    by_workspace = health.board(workspace_id=alice.workspace.id)
    assert {r.endpoint.id for r in by_workspace.rows} == {scene["hook"].id, scene["quiet"].id}
    assert {c[0] for c in by_workspace.endpoint_choices} == {scene["hook"].id, scene["quiet"].id}
    by_endpoint = health.board(endpoint_id=scene["other"].id)
    assert [r.endpoint.id for r in by_endpoint.rows] == [scene["other"].id]
    assert by_endpoint.rows[0].attempts == 1 and by_endpoint.rows[0].total == 1  # none of acme's
    assert health.board(workspace_id=alice.workspace.id, endpoint_id=scene["other"].id).rows == []
    assert health.board(endpoint_id="wh_nothing").rows == []


def test_board_shows_at_most_max_endpoints(alice, monkeypatch):
    monkeypatch.setattr(health, "MAX_ENDPOINTS", 3)
    for i in range(4):
        make_endpoint(alice.workspace, alice, f"hook {i}")
    board = health.board()
    assert len(board.rows) == 3 and board.more_endpoints


# --- the page ---------------------------------------------------------------------------------


def test_staff_sees_the_board(staff, scene):
    response = staff.get(BOARD)
    assert response.status_code == 200
    page = response.content.decode()
    section = page[page.index(f'id="health-{scene["hook"].id}"'):]
    section = section[: section.index("</section>")]
    assert '<span class="total">12</span>' in section
    assert "87.5 %" in section
    assert "p50 ≤ 50 ms, p99 ≤ 1 s" in section
    assert '<span class="due">2 due</span>' in section and '<span class="retrying">2 retrying</span>' in section
    assert section.count('<rect class="bar"') >= 2 and "<svg" in section
    assert "<script" not in page[page.index('id="content-main"'):]  # drawn server-side


def test_dead_letter_link_opens_the_filtered_changelist(staff, scene):
    page = staff.get(BOARD).content.decode()
    link = re.search(r'id="health-%s".*?class="dead-letters" href="([^"]+)">(\d+)<' % scene["hook"].id, page, re.S)
    assert link and link.group(2) == "2"
    url = link.group(1).replace("&amp;", "&")
    listed = staff.get(url)
    assert listed.status_code == 200
    shown = set(re.findall(r'title="(dlv_[0-9a-z]+)"', listed.content.decode()))
    expected = set(Delivery.objects.filter(endpoint=scene["hook"], status="dead_letter",
                                           created_at__gte=scene["now"] - timedelta(days=7)).values_list("id", flat=True))
    assert shown == expected and len(shown) == 2, unquote(url)


def test_filter_parameters_on_the_page(staff, scene, alice):
    page = staff.get(BOARD, {"workspace": alice.workspace.id}).content.decode()
    assert f'id="health-{scene["hook"].id}"' in page and f'id="health-{scene["other"].id}"' not in page
    page = staff.get(BOARD, {"endpoint": scene["other"].id}).content.decode()
    assert f'id="health-{scene["other"].id}"' in page and f'id="health-{scene["hook"].id}"' not in page
    assert "match these filters" in staff.get(BOARD, {"endpoint": "nope"}).content.decode()


def test_anonymous_and_non_staff_are_sent_to_the_login(alice, bob, scene):
    anonymous = Client().get(BOARD)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    member = Client()
    member.force_login(bob.user)  # an active member, not staff
    refused = member.get(BOARD)
    assert refused.status_code == 302 and refused["Location"].startswith("/admin/login/")
    assert "orders hook" not in refused.content.decode()


def test_staff_without_permission_to_view_deliveries_is_refused(alice, scene):
    alice.user.is_staff = True
    alice.user.save()
    client = Client()
    client.force_login(alice.user)
    assert client.get(BOARD).status_code == 403
    assert "delivery-health-module" not in client.get("/admin/").content.decode()
    alice.user.user_permissions.add(Permission.objects.get(codename="view_delivery"))
    client.force_login(alice.user)
    assert client.get(BOARD).status_code == 200
    assert BOARD in client.get("/admin/").content.decode()


def test_linked_from_the_admin_index_the_endpoint_and_the_deliveries(staff, scene):
    assert f'href="{BOARD}"' in staff.get("/admin/").content.decode()
    endpoint_page = staff.get(f"/admin/webhooks/webhookendpoint/{scene['hook'].id}/change/").content.decode()
    assert f'href="{BOARD}?endpoint={scene["hook"].id}"' in endpoint_page
    assert f'href="{BOARD}"' in staff.get("/admin/webhooks/delivery/").content.decode()


def test_query_count_does_not_grow_with_endpoints_or_rows(staff, alice, scene):
    staff.get(BOARD)
    with CaptureQueriesContext(connection) as few:
        assert staff.get(BOARD).status_code == 200
    for i in range(15):
        endpoint = make_endpoint(alice.workspace, alice, f"more {i}")
        delivery(endpoint, "dead_letter", scene["now"], durations=[10], errors=["timeout"])
        delivery(endpoint, "retrying", scene["now"], durations=[10], errors=["http_error"],
                 next_attempt_at=scene["now"])
    with CaptureQueriesContext(connection) as many:
        assert staff.get(BOARD).status_code == 200
    # 12 for the board, and the one batch check of the shown endpoints' installations (members,
    # workspaces, keys), so an installation that stopped holding reads inactive here too.
    assert len(many) == len(few) <= 15, [q["sql"] for q in many.captured_queries]


def test_changelist_columns(staff, scene):
    page = staff.get("/admin/webhooks/delivery/").content.decode()
    table = page[page.index('<table id="result_list"'):]
    header = table[: table.index("</thead>")]
    for column in ("delivery", "endpoint", "status", "event type", "attempts", "http", "next attempt", "created"):
        assert re.search(rf">\s*{column}\s*<", header, re.I), column
    assert scene["dead"].id in page and "orders hook" in page


# --- indexes ----------------------------------------------------------------------------------


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's plan text; PostgreSQL: bench/webhooks_admin.py")
def test_aggregates_read_their_indexes(scene):
    from apps.webhooks.models import ACTIVE_STATUSES
    from django.db.models import Count

    ids = [scene["hook"].id, scene["other"].id]
    since = scene["now"] - timedelta(hours=24)

    def plan(queryset) -> str:
        sql, params = queryset.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return " | ".join(row[-1] for row in cursor.fetchall())

    by_hour = (Delivery.objects.filter(endpoint_id__in=ids, status__in=health.ALL_STATUSES, created_at__gte=since)
               .annotate(hour=health.HourKey("created_at")).values("endpoint_id", "status", "hour")
               .annotate(n=Count("*")).order_by())
    assert "COVERING INDEX delivery_endpoint_outcome" in plan(by_hour)
    dead = (Delivery.objects.filter(endpoint_id__in=ids, status="dead_letter", created_at__gte=since)
            .values("endpoint_id").annotate(n=Count("*")).order_by())
    assert "COVERING INDEX delivery_endpoint_outcome" in plan(dead)
    # The backlog (active rows only): an index on status, never a walk of the whole table.
    # (SQLite cannot use the partial index delivery_endpoint_due here: the ORM binds the
    # statuses as parameters, and a partial index needs them as literals.)
    for active in (
        Delivery.objects.filter(endpoint_id__in=ids, status__in=ACTIVE_STATUSES, next_attempt_at__lte=since),
        Delivery.objects.filter(endpoint_id__in=ids, status__in=ACTIVE_STATUSES),
    ):
        text = plan(active.values("endpoint_id", "status").annotate(n=Count("*")).order_by())
        assert "SCAN webhooks_delivery" not in text and "status=?" in text, text
    attempts = board_attempt_queries(scene["now"])
    assert attempts and all("COVERING INDEX attempt_endpoint_started" in plan_of(sql) for sql in attempts[:1])
    assert all("webhooks_delivery " not in plan_of(sql) + " " for sql in attempts), [plan_of(s) for s in attempts]


def board_attempt_queries(now) -> list[str]:
    """The SQL the board ran against the attempts table, as executed (parameters inlined)."""
    with CaptureQueriesContext(connection) as queries:
        health.board(now=now + timedelta(seconds=2))
    return [q["sql"] for q in queries.captured_queries if 'FROM "webhooks_deliveryattempt"' in q["sql"]]


def plan_of(sql: str) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            return " | ".join(row[-1] for row in cursor.fetchall())
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner (SQLite: the test above)")
def test_board_attempts_never_read_the_deliveries_on_postgresql(scene):
    """At 1,000,000 deliveries the attempts query used to join a sequential scan of every
    delivery for each attempt's endpoint; it now reads only the attempts' own index."""
    # Make the tables look large enough that the planner would pick the join it picked at 1M,
    # and forbid sequential scans so a plan that can only read the table shows itself.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE webhooks_delivery")
        cursor.execute("ANALYZE webhooks_deliveryattempt")
        cursor.execute("SET LOCAL enable_seqscan = off")
    queries = board_attempt_queries(scene["now"])
    assert len(queries) == 2, queries  # durations by bucket, then the last errors
    for sql in queries:
        plan = plan_of(sql)
        assert "webhooks_delivery " not in plan + " " and "on webhooks_delivery\n" not in plan + "\n", plan
        assert "Seq Scan" not in plan and "attempt_endpoint_started" in plan, plan
    # The old query (attempt -> delivery for the endpoint) does read the deliveries: the check can fail.
    from django.db.models import Count
    old = (DeliveryAttempt.objects.filter(started_at__gte=scene["now"] - timedelta(hours=24))
           .values("delivery__endpoint_id").annotate(n=Count("*")).order_by())
    sql, params = old.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        assert "webhooks_delivery " in "\n".join(row[0] for row in cursor.fetchall()) + " "
