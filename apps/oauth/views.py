"""OAuth endpoints: DOT's views with Connect's policy in front.

- ConsentView: the authorization endpoint. Before anyone logs in it refuses requests that
  cannot succeed (PKCE other than S256, a missing or foreign `resource`); after login it asks
  the member to pick one of their workspaces and binds the grant to it.
- TokenView, RevokeView: DOT's, behind a check of the form that refuses what DOT would not
  survive (a grant type we do not offer, a repeated parameter) with an RFC 6749 §5.2 body.
- RegistrationView, RegistrationManagementView: RFC 7591/7592, open to anyone, for public
  clients only, on registration and on every update.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import orjson
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from oauth2_provider.exceptions import FatalClientError, OAuthToolkitError
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import AuthorizationView, RevokeTokenView
from oauth2_provider.views import TokenView as DotTokenView
from oauth2_provider.views.dynamic_client_registration import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)
from oauthlib.common import INVALID_HEX_PATTERN
from oauthlib.oauth2.rfc6749.errors import (
    CustomOAuth2Error,
    InvalidClientIdError,
    InvalidRequestFatalError,
    MismatchingRedirectURIError,
)

from apps.core.errors import ApiError, MethodNotAllowed, UnsupportedGrantType, error_response, invalid
from apps.core.text import NotText, loads_text
from apps.oauth import redirect_uris
from apps.oauth.audience import audience_for_request
from apps.oauth.forms import ConsentForm
from apps.oauth.models import Application
from apps.oauth.redirect_uris import redirect_target
from apps.oauth.selectors import consentable_memberships
from apps.oauth.validators import ALLOWED_GRANT_TYPES, WORKSPACE_ATTR
from engine.authorization_response import with_issuer

# RFC 6749 §3.2: a parameter is sent at most once; RFC 8707 lets `resource` repeat.
REPEATABLE_PARAMETERS = frozenset({"resource"})
# Named in an error's detail; any other name is the client's text and is not echoed.
KNOWN_PARAMETERS = frozenset({
    "grant_type", "code", "redirect_uri", "code_verifier", "client_id", "client_secret",
    "refresh_token", "scope", "token", "token_type_hint",
})


class ConsentView(AuthorizationView):
    template_name = "oauth/consent.html"
    form_class = ConsentForm

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        self.oauth2_data = {}
        if undecodable_query(request):
            error = InvalidRequestFatalError(description="The query string is not valid percent-encoding.")
            return self.error_response(FatalClientError(error), None)
        if request.method == "GET":
            # Checked before the login redirect: the client learns at once, and nobody types a
            # password for a request that cannot succeed.
            refusal = self.refuse_unacceptable_request(request)
            if refusal is not None:
                return refusal
        return super().dispatch(request, *args, **kwargs)

    def refuse_unacceptable_request(self, request: HttpRequest) -> HttpResponse | None:
        application = Application.objects.filter(client_id=request.GET.get("client_id", "")).first()
        try:
            _scopes, credentials = self.validate_authorization_request(request)
        except OAuthToolkitError as error:
            # Unknown client or redirect URI: an error page, never a redirect (DOT decides).
            return self.error_response(error, application)
        application = application or Application.objects.filter(client_id=credentials["client_id"]).first()
        if credentials.get("code_challenge_method") != "S256":
            return self.refuse(credentials, application, "invalid_request", "PKCE with S256 is required.")
        audience = audience_for_request(request.GET.getlist("resource"), base_url=settings.CONNECT_BASE_URL)
        if audience is None:
            return self.refuse(
                credentials,
                application,
                "invalid_target",
                f"resource must be {settings.CONNECT_BASE_URL} or {settings.CONNECT_BASE_URL}/mcp.",
            )
        # DOT reads the request again after login: hand it the normalised audience, and no
        # approval_prompt=auto shortcut, since only the consent form binds a workspace.
        query = request.GET.copy()
        query.setlist("resource", [audience])
        query.pop("approval_prompt", None)
        request.GET = query
        return None

    def refuse(self, credentials: dict, application, error: str, description: str) -> HttpResponse:
        oauth_error = CustomOAuth2Error(error=error, description=description, state=credentials.get("state"))
        error = OAuthToolkitError(oauth_error, redirect_uri=credentials["redirect_uri"])
        return self.error_response(error, application)

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not self.memberships:
            return self.no_workspace_response()
        return super().get(request, *args, **kwargs)

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        refusal = self.refuse_unregistered_client(request)
        if refusal is not None:
            return refusal
        if not self.memberships:
            return self.no_workspace_response()
        return super().post(request, *args, **kwargs)

    def refuse_unregistered_client(self, request: HttpRequest) -> HttpResponse | None:
        """The consent form's hidden client and redirect URI may have been edited: unless a
        registered client owns both, the member gets the error page and nobody a redirect."""
        application = Application.objects.filter(client_id=request.POST.get("client_id", "")).first()
        if application is None:
            return self.error_response(FatalClientError(InvalidClientIdError()), None)
        if not application.redirect_uri_allowed(request.POST.get("redirect_uri", "")):
            return self.error_response(FatalClientError(MismatchingRedirectURIError()), application)
        return None

    @property
    def memberships(self) -> list:
        if not hasattr(self, "_memberships"):
            self._memberships = list(consentable_memberships(user=self.request.user))
        return self._memberships

    def no_workspace_response(self) -> HttpResponse:
        return render(self.request, "oauth/no_workspace.html", status=403)

    def get_form_kwargs(self) -> dict:
        return {**super().get_form_kwargs(), "memberships": self.memberships}

    def get_context_data(self, **kwargs) -> dict:
        context = super().get_context_data(**kwargs)
        form = context.get("form")
        if form is not None and "application" not in context:
            # Re-rendered after a POST without a workspace: rebuild what DOT's GET put there.
            client_id = form.data.get("client_id", "")
            context["application"] = Application.objects.filter(client_id=client_id).first()
            context["scopes"] = form.data.get("scope", "").split()
        context["scope_descriptions"] = [
            settings.CONNECT_SCOPES.get(scope, scope) for scope in context.get("scopes", [])
        ]
        context.update(self.client_trust(context.get("application"), form))
        return context

    @staticmethod
    def client_trust(application: Application | None, form) -> dict:
        """What the member needs to judge the client (MCP authorization security
        considerations): where the code will go, whether the name is only the client's own
        claim, and whether only loopback redirect URIs stand behind it."""
        if application is None or form is None:
            return {}
        redirect_uri = (form.data.get("redirect_uri") if form.is_bound else None) or form.initial.get("redirect_uri")
        registered = application.redirect_uris.split()
        return {
            # A metadata-document client is its URL: the draft asks that its host be shown, the
            # one part of the client's identity nobody else can claim.
            "document_host": document_host(application),
            "redirect_host": redirect_target(redirect_uri or (registered[0] if registered else "")),
            # Registered by an operator: the name is ours. Dynamically or by metadata document:
            # anyone could have chosen it.
            "client_unverified": application.registration_source != Application.RegistrationSource.MANUAL,
            "registration_source": application.get_registration_source_display(),
            "loopback_only": redirect_uris.loopback_only(registered),
        }

    def redirect(self, redirect_to: str, application) -> HttpResponse:
        # RFC 9207: every authorization response names its issuer, errors included (DOT adds
        # `iss` only to successful ones; adding it again is harmless, the helper keeps one).
        issuer = oauth2_settings.oauth2_authorization_server_issuer(self.request)
        return super().redirect(with_issuer(redirect_to, issuer), application)

    def form_valid(self, form: ConsentForm) -> HttpResponse:
        application = Application.objects.filter(client_id=form.cleaned_data["client_id"]).first()
        if not form.cleaned_data.get("allow"):
            return super().form_valid(form)  # DOT answers access_denied to the client
        membership = form.chosen_membership()
        if membership is None:
            form.add_error("workspace", "Choose the workspace this application may read.")
            return self.form_invalid(form)
        # The hidden fields could have been edited since the GET: check the policy again.
        credentials = {"redirect_uri": form.cleaned_data["redirect_uri"], "state": form.cleaned_data.get("state")}
        if form.cleaned_data.get("code_challenge_method") != "S256":
            return self.refuse(credentials, application, "invalid_request", "PKCE with S256 is required.")
        audience = audience_for_request(
            (form.cleaned_data.get("resource") or "").split(), base_url=settings.CONNECT_BASE_URL
        )
        if audience is None:
            return self.refuse(credentials, application, "invalid_target", "Unsupported resource.")
        self.consented_workspace_id = membership.workspace_id
        return super().form_valid(form)

    def create_authorization_response(self, request, scopes, credentials, allow):
        workspace_id = getattr(self, "consented_workspace_id", None)
        if allow and workspace_id is not None:
            # oauthlib copies credentials onto its request; the validator stores it on the grant.
            credentials = {**credentials, WORKSPACE_ATTR: workspace_id}
        return super().create_authorization_response(request, scopes, credentials, allow)


def document_host(application: Application) -> str:
    """The host (and port, when one is given) of a metadata-document client's `client_id`;
    empty for any other client."""
    if application.registration_source != Application.RegistrationSource.CIMD:
        return ""
    return urlsplit(application.client_id).netloc.rpartition("@")[2]


def undecodable_query(request: HttpRequest) -> bool:
    """oauthlib parses the query string again and raises on a `%` without two hex digits after
    it, which Django decodes leniently: DOT must never be handed one."""
    return bool(INVALID_HEX_PATTERN.search(request.META.get("QUERY_STRING", "")))


def oauth_error_response(error: ApiError) -> JsonResponse:
    """Our `{"error", "detail"}` with RFC 6749 §5.2's `error_description` beside it, uncached."""
    body = error.body()
    response = JsonResponse({**body, "error_description": body.get("detail", "")}, status=error.status)
    response["Cache-Control"] = "no-store"
    return response


def repeated_parameter(params) -> ApiError | None:
    for name, values in params.lists():
        if len(values) > 1 and name not in REPEATABLE_PARAMETERS:
            shown = name if name in KNOWN_PARAMETERS else "a parameter"
            return invalid(shown, "sent more than once; send each parameter once")
    return None


def form_refusal(request: HttpRequest) -> ApiError | None:
    if undecodable_query(request):
        return invalid("query", "not valid percent-encoding")
    return repeated_parameter(request.POST)


def token_request_refusal(request: HttpRequest) -> ApiError | None:
    """What the token endpoint refuses before DOT reads the request: DOT dispatches on
    `grant_type` itself (its device-code branch reads `device_code` unchecked), so only the
    grants we offer ever reach it."""
    params = request.POST
    refusal = form_refusal(request)
    if refusal is not None:
        return refusal
    grant_type = params.get("grant_type", "")
    if not grant_type:
        return invalid("grant_type", "required: authorization_code or refresh_token")
    if grant_type not in ALLOWED_GRANT_TYPES:
        return UnsupportedGrantType(detail="grant_type: must be authorization_code or refresh_token")
    return None


class JsonMethodNotAllowed:
    """A wrong method gets our `{"error", "detail"}` 405 with its Allow header, not Django's
    empty one."""

    def http_method_not_allowed(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        allowed = [m for m in self._allowed_methods() if m != "OPTIONS"]
        response = error_response(MethodNotAllowed(detail=f"method: use {' or '.join(allowed)}"))
        response["Allow"] = ", ".join(self._allowed_methods())
        return response


class TokenView(JsonMethodNotAllowed, DotTokenView):
    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        refusal = token_request_refusal(request)
        if refusal is not None:
            return oauth_error_response(refusal)
        return super().post(request, *args, **kwargs)


class RevokeView(JsonMethodNotAllowed, RevokeTokenView):
    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        refusal = form_refusal(request)
        if refusal is not None:
            return oauth_error_response(refusal)
        return super().post(request, *args, **kwargs)


def metadata_error(description: str) -> JsonResponse:
    return JsonResponse({"error": "invalid_client_metadata", "error_description": description}, status=400)


def refuse_unless_public_client(request: HttpRequest) -> JsonResponse | None:
    """RFC 7591 §2 lets the server replace requested metadata: an omitted
    `token_endpoint_auth_method` becomes `none` rather than DOT's client_secret_basic. Anything
    else that is not a public code-flow client is refused; DOT then reads the completed body."""
    try:
        metadata = loads_text(request.body)  # PostgreSQL answered 500 to a NUL or lone surrogate
    except NotText:
        return metadata_error("Request body must be valid JSON text")
    if not isinstance(metadata, dict):
        return None  # DOT answers invalid_client_metadata
    if metadata.setdefault("token_endpoint_auth_method", "none") != "none":
        return metadata_error("Only public clients (token_endpoint_auth_method none) may register.")
    if metadata.get("response_types", ["code"]) != ["code"]:
        return metadata_error("response_types must be [\"code\"].")
    if not isinstance(metadata.get("client_name", ""), str):
        return metadata_error("client_name must be a string.")  # DOT stores it as it comes
    request._body = orjson.dumps(metadata)
    return None


class RegistrationView(JsonMethodNotAllowed, DynamicClientRegistrationView):
    """RFC 7591, open without authentication, for public clients (PKCE, no secret) only.
    Confidential clients are created by operators (`create_oauth_client --confidential`).
    Redirect URIs and grant types are checked by Application.clean.
    """

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return refuse_unless_public_client(request) or super().post(request, *args, **kwargs)


class RegistrationManagementView(JsonMethodNotAllowed, DynamicClientRegistrationManagementView):
    """RFC 7592: an update is held to the same policy as a registration."""

    def put(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return refuse_unless_public_client(request) or super().put(request, *args, **kwargs)
