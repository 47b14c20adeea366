"""All of connect.urls, plus the bare-Django references, matched first.

`/bench/bare/sessions` is the ceiling of our stack for the sessions list: the same query as
`selectors.sessions_page` (same filter, order, index and page size), `.values()` and
`JsonResponse`, in a plain sync view under the same ASGI handler and middleware, with no
authentication, no DRF, no representation functions. The workspace is resolved once per
process, so the request does one query.

`/bench/bare/sessions/<id>` is the same for one row (session get's ceiling): one query of the
same columns by workspace and id, `.values()`, `JsonResponse`, no authentication.

`/bench/bare/sessions-auth` is the same plus the production API-key lookup
(`authenticate_bearer`, one query with two joins): the gap between the two is the price of
authentication, the gap between it and `/api/v1/sessions` the price of DRF and our code.
"""

from __future__ import annotations

import os

from django.http import Http404, HttpRequest, JsonResponse
from django.urls import path

from apps.access.credentials import authenticate_bearer
from apps.recordings.models import Session
from apps.tenancy.models import Workspace
from connect.urls import handler400, handler403, handler404, handler500  # noqa: F401
from connect.urls import urlpatterns as connect_urlpatterns

FIELDS = ("id", "label", "memo", "status", "started_at", "ended_at", "created_at", "updated_at")
_workspace_ids: dict[str, str] = {}


def _workspace_id() -> str:
    slug = os.environ.get("BENCH_WORKSPACE", "bench")
    if slug not in _workspace_ids:
        _workspace_ids[slug] = Workspace.objects.values_list("id", flat=True).get(slug=slug)
    return _workspace_ids[slug]


def _page(workspace_id: str) -> JsonResponse:
    rows = Session.objects.filter(workspace_id=workspace_id).order_by("-created_at", "-id").values(*FIELDS)[:100]
    return JsonResponse({"items": list(rows), "nextCursor": None})


def bare_sessions(request: HttpRequest) -> JsonResponse:
    return _page(_workspace_id())


def bare_session(request: HttpRequest, id: str) -> JsonResponse:
    row = Session.objects.filter(workspace_id=_workspace_id(), id=id).values(*FIELDS).first()
    if row is None:
        raise Http404
    return JsonResponse({"session": row})


def bare_sessions_auth(request: HttpRequest) -> JsonResponse:
    principal = authenticate_bearer(request.META.get("HTTP_AUTHORIZATION"))
    return _page(principal.workspace.id)


urlpatterns = [
    path("bench/bare/sessions", bare_sessions),
    path("bench/bare/sessions-auth", bare_sessions_auth),
    path("bench/bare/sessions/<str:id>", bare_session),
    *connect_urlpatterns,
]
