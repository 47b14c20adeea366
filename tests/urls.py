"""Production URLs plus two views that only tests serve (tests/settings.py): they show which
thread ran a request and hold a thread for a while, to test how the server schedules work."""

import threading
import time

from django.http import JsonResponse
from django.urls import path

from connect.urls import handler400, handler403, handler404, handler500, urlpatterns as production  # noqa: F401


def thread_view(request):
    time.sleep(float(request.GET.get("hold", "0")))
    return JsonResponse({"thread": threading.get_ident()})


def sleep_view(request):
    time.sleep(float(request.GET.get("seconds", "1")))
    return JsonResponse({"slept": True})


urlpatterns = [path("test/thread", thread_view), path("test/sleep", sleep_view), *production]
