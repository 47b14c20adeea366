"""Production URLs plus views that only tests serve (tests/settings.py): they show which
thread ran a request, hold or keep a thread computing for a while, or run a slow database
statement, to test how the server schedules work and bounds it."""

import os
import threading
import time

from django.db import connection
from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from rest_framework.response import Response
from rest_framework.views import APIView

from connect.urls import handler400, handler403, handler404, handler500, urlpatterns as production  # noqa: F401


def thread_view(request):
    time.sleep(float(request.GET.get("hold", "0")))
    connection.ensure_connection()
    return JsonResponse(
        {"thread": threading.get_ident(), "process": os.getpid(), "connection": id(connection.connection)}
    )


def hold_view(request):
    """Holds its lane until the file named by `release` exists (a test's switch, not a clock),
    after creating the file named by `started`."""
    from pathlib import Path

    Path(request.GET["started"]).touch()
    release = Path(request.GET["release"])
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return JsonResponse({"released": release.exists()})


def sleep_view(request):
    time.sleep(float(request.GET.get("seconds", "1")))
    return JsonResponse({"slept": True})


def spin_view(request):
    """Keeps its lane's thread computing (pure Python, holding the GIL between switches)."""
    deadline = time.monotonic() + float(request.GET.get("seconds", "1"))
    turns = 0
    while time.monotonic() < deadline:
        turns += sum(range(1000)) > 0
    return JsonResponse({"process": os.getpid(), "turns": turns})


def slow_query(seconds: float) -> None:
    """A statement that keeps the database busy for `seconds` (unless the deadline stops it)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_sleep(%s)", [seconds])
        else:  # about 3 million rows a second
            cursor.execute(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %s) SELECT count(*) FROM c",
                [int(seconds * 3_000_000)],
            )


def slow_query_view(request):
    slow_query(float(request.GET.get("seconds", "30")))
    return JsonResponse({"slept": True})


@csrf_exempt
def slow_write_view(request):
    """A write that first notes each attempt in the file named by `attempts`, then keeps the
    database busy: shows whether the server ran it more than once."""
    with open(request.GET["attempts"], "a") as attempts:
        attempts.write("attempt\n")
    slow_query(float(request.GET.get("seconds", "30")))
    return JsonResponse({"slept": True})


class SlowQueryApi(APIView):
    authentication_classes: list = []

    def get(self, request):
        slow_query(float(request.GET.get("seconds", "30")))
        return Response({"slept": True})


urlpatterns = [
    path("test/thread", thread_view),
    path("test/sleep", sleep_view),
    path("test/spin", spin_view),
    path("test/hold", hold_view),
    path("test/slow-query", slow_query_view),
    path("test/slow-query-api", SlowQueryApi.as_view()),
    path("test/slow-write", slow_write_view),
    *production,
]
