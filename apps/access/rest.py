"""REST's adapter over the doorkeeper: DRF's authentication and permission classes, the
exception handler that renders every REST failure, and the middleware that puts the rate-limit
headers on every answer (settings.REST_FRAMEWORK, settings.MIDDLEWARE).

`request.auth` is the Principal; `request.user` its issuer's user.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.http import JsonResponse
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from apps.access.admission import admit
from apps.access.credentials import require_scope
from apps.access.render import challenge, www_authenticate
from apps.core.errors import ApiError, Unauthorized, as_api_error, error_response
from apps.oauth.audience import rest_audiences

logger = logging.getLogger("connect.errors")


def view_scopes(view: Any, method: str | None = None) -> tuple[str, ...]:
    """The scopes a view needs, as it declares them: its `HasScope` permission classes, or, for a
    view that checks scopes in code per method, `required_scopes = {"get": (…), …}`. Read by
    the door (named when it refuses an ingest key) and by /openapi.json (the operation's security)."""
    declared = [getattr(permission, "scope", "") for permission in getattr(view, "permission_classes", ())]
    by_method = getattr(view, "required_scopes", {})
    if method is not None:
        declared += by_method.get(method.lower(), ())
    return tuple(scope for scope in dict.fromkeys(declared) if scope)


class BearerAuthentication(BaseAuthentication):
    """Admission for a DRF view: the credential, then the rate limit (before the view's scopes)."""

    def authenticate(self, request):
        # A view that is the ingest API says so (`ingest = True`): only ingest credentials pass.
        view = (request.parser_context or {}).get("view")
        audiences = rest_audiences(settings.CONNECT_BASE_URL)
        admission = admit(
            request.META.get("HTTP_AUTHORIZATION"), audiences=audiences, ingest=getattr(view, "ingest", False),
            needs=view_scopes(view, request.method),
        )
        request._request.rate_limit = admission.rate  # read by RateLimitHeadersMiddleware
        if admission.error is not None:
            raise admission.error
        return admission.principal.issuer.user, admission.principal

    def authenticate_header(self, request) -> str:
        return www_authenticate()


class HasScope(BasePermission):
    """`permission_classes = [HasScope.of("svc:sessions:read")]`."""

    scope: str = ""

    @classmethod
    def of(cls, scope: str) -> type[HasScope]:
        return type(f"HasScope_{scope}", (cls,), {"scope": scope})

    def has_permission(self, request, view) -> bool:
        if request.auth is None:
            raise Unauthorized()
        require_scope(request.auth, self.scope)
        return True


def exception_handler(exc: Exception, context: dict[str, Any]) -> JsonResponse:
    """DRF EXCEPTION_HANDLER: every failure becomes `{"error": code}`; unknown ones are logged.
    The rate-limit headers are added by RateLimitHeadersMiddleware, on every answer."""
    error = as_api_error(exc)
    if error is None:
        view = context.get("view")
        logger.exception("unhandled error in %s", type(view).__name__ if view else "view", exc_info=exc)
        error = ApiError()
    return error_response(error, challenge(error))


class RateLimitHeadersMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        decision = getattr(request, "rate_limit", None)
        if decision is not None:
            for name, value in decision.headers():
                response[name] = value
        return response
