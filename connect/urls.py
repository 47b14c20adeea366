from django.contrib import admin
from django.urls import include, path, re_path

from apps.core import errors, health
from connect import schema, scrape

urlpatterns = [
    path("", health.index, name="index"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", scrape.metrics_view, name="metrics"),
    path("api/v1/", include("apps.recordings.urls")),
    path("api/v1/", include("apps.webhooks.urls")),
    path("api/v1/", include("apps.events.urls")),
    path("api/v1/", include("apps.ingest.urls")),
    # Anything else under /api/v1 is a JSON 404, never an HTML page or a slash redirect.
    re_path(r"^api/v1(/.*)?$", errors.not_found_view),
    path("", include("connect.wellknown")),
    path("openapi.json", schema.openapi_view, name="openapi"),
    path("docs", schema.docs_view, name="docs"),
    path("admin/", admin.site.urls),
    path("", include("apps.oauth.urls")),
]

handler400 = "apps.core.errors.bad_request_view"
handler403 = "apps.core.errors.permission_denied_view"
handler404 = "apps.core.errors.not_found_view"
handler500 = "apps.core.errors.server_error_view"
