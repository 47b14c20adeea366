"""The delivery health board's numbers: per webhook endpoint, its deliveries of the last 24 hours
by outcome and by hour, the duration of its attempts (p50/p99), what is due or retrying now,
its dead letters of the last 7 days and its last error.

Every number is one grouped aggregate over an index, so the page costs a fixed number of
queries whatever the number of endpoints shown (at most `MAX_ENDPOINTS`), and each query reads
the index entries of its time window, not the table's history: outcomes and dead letters
through `delivery_endpoint_outcome`, one range per endpoint and status; due and retrying through
`delivery_due`, so the cost follows the backlog; attempts through `attempt_endpoint_started`,
index only, since an attempt stores its delivery's endpoint (docs/decisions/webhooks.md "The
attempt's endpoint"). Percentiles come from durations counted in fixed buckets
(`DURATION_BOUNDS_MS`) by one `GROUP BY`: SQLite has no percentile function, and an exact one
sorts every duration; p50/p99 is the upper bound of the bucket the rank falls in.

The pure parts (percentiles, the chart's geometry) are plain functions with unit tests."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.db.models import Case, CharField, Count, Func, IntegerField, Max, Q, Value, When
from django.utils import timezone

from apps.tenancy.models import Workspace
from apps.webhooks.models import ACTIVE_STATUSES, Delivery, DeliveryAttempt, DeliveryStatus, WebhookEndpoint

MAX_ENDPOINTS = 50
HOURS = 24
DEAD_LETTER_DAYS = 7
MAX_CHOICES = 500

# Upper bounds (exclusive) of the duration buckets, in milliseconds; the last bucket is open.
DURATION_BOUNDS_MS = (1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 40, 50, 70, 100, 150, 200, 300, 400, 500, 700, 1_000, 1_500,
                      2_000, 3_000, 4_000, 5_000, 7_000, 10_000, 15_000, 20_000, 30_000, 45_000, 60_000)

# The chart's stacking order (bottom up) and colours; every status has one.
OUTCOMES = (
    (DeliveryStatus.SUCCEEDED, "#2e7d32"),
    (DeliveryStatus.PENDING, "#1e88e5"),
    (DeliveryStatus.RETRYING, "#f9a825"),
    (DeliveryStatus.DEAD_LETTER, "#c62828"),
    (DeliveryStatus.CANCELLED, "#9e9e9e"),
)
ALL_STATUSES = tuple(status for status, _ in OUTCOMES)


class HourKey(Func):
    """The UTC hour of a datetime column as text, `YYYY-MM-DD HH`, with native functions
    (Django's TruncHour calls a Python function per row on SQLite)."""

    output_field = CharField()

    def as_sqlite(self, compiler, connection, **extra):
        # Django stores datetimes on SQLite as UTC text, `YYYY-MM-DD HH:MM:SS[.ffffff]`.
        return self.as_sql(compiler, connection, template="substr(%(expressions)s, 1, 13)", **extra)

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, template="to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24')", **extra
        )


def hour_key(moment: datetime) -> str:
    return moment.astimezone(dt_timezone.utc).strftime("%Y-%m-%d %H")


def duration_bucket():
    """The index into DURATION_BOUNDS_MS of an attempt's duration (len() for the open bucket)."""
    return Case(
        *(When(duration_ms__lt=bound, then=Value(i)) for i, bound in enumerate(DURATION_BOUNDS_MS)),
        default=Value(len(DURATION_BOUNDS_MS)),
        output_field=IntegerField(),
    )


# --- pure parts -------------------------------------------------------------------------------


def percentile_from_histogram(counts: dict[int, int], fraction: float) -> int | None:
    """The upper bound (ms) of the bucket holding the `fraction` rank of the counted durations;
    None when nothing was counted, and -1 for the open bucket past the last bound."""
    total = sum(counts.values())
    if total == 0:
        return None
    rank = max(1, -(-int(total * fraction * 1_000_000) // 1_000_000))  # ceil without float drift
    seen = 0
    for bucket in sorted(counts):
        seen += counts[bucket]
        if seen >= rank:
            return DURATION_BOUNDS_MS[bucket] if bucket < len(DURATION_BOUNDS_MS) else -1
    return -1  # not reached: seen == total >= rank


def duration_label(bound_ms: int | None) -> str:
    """A percentile from `percentile_from_histogram` as the page shows it."""
    if bound_ms is None:
        return "-"
    if bound_ms == -1:
        return f"> {DURATION_BOUNDS_MS[-1] // 1000} s"
    return f"≤ {bound_ms} ms" if bound_ms < 1000 else f"≤ {bound_ms / 1000:g} s"


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    color: str
    title: str


@dataclass
class Chart:
    width: int
    height: int
    bars: list[Bar]
    peak: int
    labels: list[tuple[float, str]]  # (x, text) under the axis

    @property
    def mid(self) -> float:
        return self.width / 2

    @property
    def mid_y(self) -> float:
        return self.height / 2


def hourly_chart(hours: list[str], counts: dict[str, dict[str, int]], *, width: int = 360, height: int = 80) -> Chart:
    """Stacked bars, one per hour (oldest left), heights scaled to the busiest hour; an empty
    hour draws nothing. `counts[hour][status]` are deliveries created in that hour."""
    slot = width / len(hours)
    gap = 1 if slot > 4 else 0
    peak = max((sum(counts.get(h, {}).values()) for h in hours), default=0)
    bars = []
    for i, hour in enumerate(hours):
        y = float(height)
        for status, color in OUTCOMES:
            n = counts.get(hour, {}).get(status, 0)
            if n and peak:
                h = height * n / peak
                y -= h
                bars.append(Bar(x=round(i * slot, 2), y=round(y, 2), width=round(slot - gap, 2), height=round(h, 2),
                                color=color, title=f"{hour}:00 UTC: {n} {status.replace('_', ' ')}"))
    labels = [(round(i * slot, 2), hours[i][11:13] + "h") for i in range(0, len(hours), 6)]
    return Chart(width=width, height=height, bars=bars, peak=peak, labels=labels)


# --- the board --------------------------------------------------------------------------------


@dataclass
class EndpointHealth:
    endpoint: WebhookEndpoint
    by_outcome: dict[str, int] = field(default_factory=dict)
    by_hour: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    durations: dict[int, int] = field(default_factory=dict)
    pending: int = 0
    retrying: int = 0
    due_now: int = 0
    dead_letters_week: int = 0
    last_error: dict | None = None
    chart: Chart | None = None

    @property
    def total(self) -> int:
        return sum(self.by_outcome.values())

    @property
    def success_rate(self) -> float | None:
        """Succeeded ÷ (succeeded + dead letters) of the window; cancelled ones (endpoint
        deleted or disabled, installation revoked) and unfinished ones are not counted."""
        ok = self.by_outcome.get(DeliveryStatus.SUCCEEDED, 0)
        finished = ok + self.by_outcome.get(DeliveryStatus.DEAD_LETTER, 0)
        return ok / finished if finished else None

    @property
    def p50_ms(self) -> int | None:
        return percentile_from_histogram(self.durations, 0.50)

    @property
    def p99_ms(self) -> int | None:
        return percentile_from_histogram(self.durations, 0.99)

    @property
    def success_label(self) -> str:
        rate = self.success_rate
        return "-" if rate is None else f"{rate * 100:.1f} %"

    @property
    def p50_label(self) -> str:
        return duration_label(self.p50_ms)

    @property
    def p99_label(self) -> str:
        return duration_label(self.p99_ms)

    @property
    def outcome_counts(self) -> list[tuple[str, int]]:
        return [(status.value, self.by_outcome.get(status, 0)) for status, _ in OUTCOMES]

    @property
    def attempts(self) -> int:
        return sum(self.durations.values())


@dataclass
class Board:
    now: datetime
    since: datetime
    week_since: datetime
    hours: list[str]
    rows: list[EndpointHealth]
    more_endpoints: bool
    workspaces: list[Workspace]
    endpoint_choices: list[tuple[str, str, str]]  # (id, name, workspace slug)


def board(*, workspace_id: str | None = None, endpoint_id: str | None = None, now: datetime | None = None) -> Board:
    now = now or timezone.now()
    current_hour = now.replace(minute=0, second=0, microsecond=0)
    since = current_hour - timedelta(hours=HOURS - 1)
    week_since = now - timedelta(days=DEAD_LETTER_DAYS)
    hours = [hour_key(since + timedelta(hours=i)) for i in range(HOURS)]

    endpoints = WebhookEndpoint.objects.select_related("workspace").order_by("workspace__slug", "name", "id")
    if workspace_id:
        endpoints = endpoints.filter(workspace_id=workspace_id)
    endpoint_choices = list(endpoints.values_list("id", "name", "workspace__slug")[:MAX_CHOICES])
    if endpoint_id:
        endpoints = endpoints.filter(id=endpoint_id)
    shown = list(endpoints[: MAX_ENDPOINTS + 1])
    more = len(shown) > MAX_ENDPOINTS
    rows = {e.id: EndpointHealth(endpoint=e) for e in shown[:MAX_ENDPOINTS]}
    workspaces = list(Workspace.objects.order_by("slug")[:MAX_CHOICES])
    ids = list(rows)
    if ids:
        _fill(rows, ids, since=since, week_since=week_since, now=now)
    for row in rows.values():
        row.chart = hourly_chart(hours, row.by_hour)
    return Board(now=now, since=since, week_since=week_since, hours=hours, rows=list(rows.values()),
                 more_endpoints=more, workspaces=workspaces, endpoint_choices=endpoint_choices)


def _fill(rows: dict[str, EndpointHealth], ids: list[str], *, since, week_since, now) -> None:
    # Outcomes by hour: (endpoint, status, created_at) ranges, index only.
    by_hour = (
        Delivery.objects.filter(endpoint_id__in=ids, status__in=ALL_STATUSES, created_at__gte=since)
        .annotate(hour=HourKey("created_at"))
        .values("endpoint_id", "status", "hour")
        .annotate(n=Count("*"))
        .order_by()
    )
    for r in by_hour:
        row = rows[r["endpoint_id"]]
        row.by_hour[r["hour"]][r["status"]] = r["n"]
        row.by_outcome[r["status"]] = row.by_outcome.get(r["status"], 0) + r["n"]

    # Dead letters of the week: the same index, one status.
    dead = (
        Delivery.objects.filter(endpoint_id__in=ids, status=DeliveryStatus.DEAD_LETTER, created_at__gte=week_since)
        .values("endpoint_id").annotate(n=Count("*")).order_by()
    )
    for r in dead:
        rows[r["endpoint_id"]].dead_letters_week = r["n"]

    # Waiting now, whatever their age: active rows only (the backlog), by status.
    active = (
        Delivery.objects.filter(endpoint_id__in=ids, status__in=ACTIVE_STATUSES)
        .values("endpoint_id", "status").annotate(n=Count("*")).order_by()
    )
    for r in active:
        setattr(rows[r["endpoint_id"]], r["status"], r["n"])
    due = (
        Delivery.objects.filter(endpoint_id__in=ids, status__in=ACTIVE_STATUSES, next_attempt_at__lte=now)
        .values("endpoint_id").annotate(n=Count("*")).order_by()
    )
    for r in due:
        rows[r["endpoint_id"]].due_now = r["n"]

    # Attempts of the window: durations by bucket, and each endpoint's latest failed attempt,
    # from `attempt_endpoint_started` (endpoint, started_at, duration_ms, error): one range per
    # endpoint shown, index only, no delivery read (the endpoint is stored on the attempt).
    attempts = (
        DeliveryAttempt.objects.filter(endpoint_id__in=ids, started_at__gte=since)
        .annotate(bucket=duration_bucket())
        .values("endpoint_id", "bucket")
        .annotate(n=Count("*"), last_failed=Max("started_at", filter=~Q(error="")))
        .order_by()
    )
    last_failed: dict[str, datetime] = {}
    for r in attempts:
        endpoint = r["endpoint_id"]
        rows[endpoint].durations[r["bucket"]] = r["n"]
        if r["last_failed"] and (endpoint not in last_failed or r["last_failed"] > last_failed[endpoint]):
            last_failed[endpoint] = r["last_failed"]
    if last_failed:
        failures = (
            DeliveryAttempt.objects.filter(endpoint_id__in=list(last_failed), started_at__in=set(last_failed.values()))
            .exclude(error="")
            .values("endpoint_id", "delivery_id", "number", "started_at", "error", "error_detail", "http_status")
            .order_by()
        )
        for r in failures:
            endpoint = r["endpoint_id"]
            if r["started_at"] == last_failed.get(endpoint) and rows[endpoint].last_error is None:
                rows[endpoint].last_error = r
