"""DOT's models, swapped so grants and tokens carry the workspace chosen at consent.

The workspace travels consent → Grant → AccessToken/RefreshToken → rotated tokens
(apps/oauth/validators.py). A token without a workspace is never accepted (401).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from oauth2_provider.models import (
    AbstractAccessToken,
    AbstractApplication,
    AbstractGrant,
    AbstractIDToken,
    AbstractRefreshToken,
    ApplicationManager,
)

from apps.oauth import redirect_uris
from apps.tenancy.models import Workspace


class Application(AbstractApplication):
    """An OAuth client: registered dynamically (RFC 7591), by its metadata document (CIMD),
    or by an operator (`create_oauth_client`)."""

    objects = ApplicationManager()

    class Meta(AbstractApplication.Meta):
        verbose_name = "OAuth application"

    def natural_key(self):
        return (self.client_id,)

    def get_allowed_schemes(self) -> list[str]:
        return redirect_uris.allowed_schemes(self.redirect_uris.split())

    def clean(self) -> None:
        errors: dict[str, list] = {}
        try:
            super().clean()
        except ValidationError as exc:
            errors.update(exc.message_dict)
        problems = [
            f"{uri} {problem}"
            for uri in self.redirect_uris.split()
            if (problem := redirect_uris.redirect_uri_problem(uri))
        ]
        if problems:
            errors.setdefault("redirect_uris", []).extend(problems)
        if self.authorization_grant_type != self.GRANT_AUTHORIZATION_CODE:
            errors.setdefault("authorization_grant_type", []).append(
                "Connect issues tokens only through the authorization code flow."
            )
        if self.skip_authorization:
            # Consent is where the member chooses the workspace; without it no grant can be bound.
            errors.setdefault("skip_authorization", []).append("Connect always asks the member for consent.")
        if errors:
            raise ValidationError(errors)


class Grant(AbstractGrant):
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, null=True, blank=True, related_name="oauth_grants"
    )

    class Meta(AbstractGrant.Meta):
        verbose_name = "OAuth grant"


class IDToken(AbstractIDToken):
    # OIDC is off; the model exists only because AccessToken points at it.
    class Meta(AbstractIDToken.Meta):
        verbose_name = "OAuth ID token"


class AccessToken(AbstractAccessToken):
    # Nullable so DOT's own tokens (the DCR registration token) fit; such tokens are refused
    # as credentials (401), as the contract requires for "a token without a workspace".
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, null=True, blank=True, related_name="oauth_access_tokens"
    )
    # SHA-256 of the authorization code the token descends from (rotations inherit it), so
    # a code presented twice revokes every token minted from it (OAuth 2.1 §4.1.3).
    code_checksum = models.CharField(max_length=64, blank=True, default="", db_index=True)

    class Meta(AbstractAccessToken.Meta):
        verbose_name = "OAuth access token"


class RefreshToken(AbstractRefreshToken):
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, null=True, blank=True, related_name="oauth_refresh_tokens"
    )
    code_checksum = models.CharField(max_length=64, blank=True, default="", db_index=True)

    class Meta(AbstractRefreshToken.Meta):
        verbose_name = "OAuth refresh token"
