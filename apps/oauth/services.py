"""Writes for OAuth clients and tokens (operator paths: command and admin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from django.db import transaction
from oauth2_provider.models import revoke_access_token

from apps.oauth.models import AccessToken, Application, RefreshToken


@dataclass(frozen=True)
class CreatedClient:
    application: Application
    client_secret: str | None  # the only time the plain secret exists: it is stored hashed


@transaction.atomic
def create_client(*, name: str, redirect_uri: str, confidential: bool = False) -> CreatedClient:
    """Raises django.core.exceptions.ValidationError for a redirect URI policy refuses."""
    application = Application(
        name=name,
        redirect_uris=redirect_uri,
        client_type=Application.CLIENT_CONFIDENTIAL if confidential else Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        registration_source=Application.RegistrationSource.MANUAL,
    )
    secret = application.client_secret if confidential else None
    if not confidential:
        application.client_secret = ""
    application.full_clean()
    application.save()
    return CreatedClient(application=application, client_secret=secret)


def revoke_access_tokens(tokens: Iterable[AccessToken]) -> int:
    """Revoke each token and the refresh token bound to it, so the client cannot mint a
    new one (DOT's shared revoke path, as the RFC 7009 endpoint uses)."""
    count = 0
    for token in tokens:
        revoke_access_token(token)
        count += 1
    return count


def revoke_refresh_tokens(tokens: Iterable[RefreshToken]) -> int:
    count = 0
    for token in tokens:
        token.revoke()  # also deletes its access token; a no-op when already revoked
        count += 1
    return count
