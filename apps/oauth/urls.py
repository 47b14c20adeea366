"""The authorization server at `{auth_url}/api/auth` (docs/api/authentication-and-scopes.md),
the login page and the signed-in page. DOT reverses its endpoints by name in the
`oauth2_provider` namespace (for its RFC 8414 metadata document, served with the other
`.well-known` documents in connect/wellknown.py), so the routes carry DOT's names."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from apps.oauth import account, views

oauth2_provider_patterns = (
    [
        re_path(r"^api/auth/oauth2/authorize/?$", views.ConsentView.as_view(), name="authorize"),
        re_path(r"^api/auth/oauth2/token/?$", views.TokenView.as_view(), name="token"),
        re_path(r"^api/auth/oauth2/revoke/?$", views.RevokeView.as_view(), name="revoke-token"),
        re_path(r"^api/auth/oauth2/register/?$", views.RegistrationView.as_view(), name="dcr-register"),
        re_path(
            r"^api/auth/oauth2/register/(?P<client_id>[^/]+)/?$",
            views.RegistrationManagementView.as_view(),
            name="dcr-register-management",
        ),
    ],
    "oauth2_provider",
)

urlpatterns = [
    path("", include(oauth2_provider_patterns)),
    path("accounts/login", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout", auth_views.LogoutView.as_view(next_page="/accounts/login"), name="logout"),
    # Django's LOGIN_REDIRECT_URL: where signing in without `next` lands.
    path("accounts/profile/", account.signed_in, name="signed-in"),
]
