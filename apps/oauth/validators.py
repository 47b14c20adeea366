"""Connect's policy on top of DOT's OAuth2Validator: which flows exist, and how the
workspace chosen at consent is carried from the grant to every token minted from it."""

from __future__ import annotations

import hashlib

from django.db import router, transaction
from django.utils import timezone
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from apps.oauth.models import AccessToken, Grant, RefreshToken

# Implicit, password, client credentials and device flows are off whatever an application
# row says (RFC 9700; docs/api/authentication-and-scopes.md).
ALLOWED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})

# Set on the oauthlib request: by the consent view (credentials), by validate_code (from the
# grant) and by validate_refresh_token (from the refresh token).
WORKSPACE_ATTR = "connect_workspace_id"


class ConnectOAuth2Validator(OAuth2Validator):
    def validate_grant_type(self, client_id, grant_type, client, request, *args, **kwargs) -> bool:
        if grant_type not in ALLOWED_GRANT_TYPES:
            return False
        return super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)

    def validate_response_type(self, client_id, response_type, client, request, *args, **kwargs) -> bool:
        if response_type != "code":
            return False
        return super().validate_response_type(client_id, response_type, client, request, *args, **kwargs)

    def save_authorization_code(self, client_id, code, request, *args, **kwargs) -> None:
        workspace_id = getattr(request, WORKSPACE_ATTR, None)
        if workspace_id is None:
            # Only the consent form supplies a workspace; no code is issued without one.
            raise errors.AccessDeniedError(description="No workspace was chosen.", request=request)
        with transaction.atomic(using=router.db_for_write(Grant)):
            grant = self._create_authorization_code(request, code)
            Grant.objects.filter(pk=grant.pk).update(workspace_id=workspace_id)

    def validate_code(self, client_id, code, client, request, *args, **kwargs) -> bool:
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            # DOT deletes a grant when its code is exchanged, so a spent code lands here: if
            # tokens came from it, the code leaked: revoke them (OAuth 2.1 §4.1.3).
            revoke_tokens_from_code(code)
            return False
        workspace_id = (
            Grant.objects.filter(code=code, application=client).values_list("workspace_id", flat=True).first()
        )
        if workspace_id is None:
            return False
        setattr(request, WORKSPACE_ATTR, workspace_id)
        return True

    def validate_refresh_token(self, refresh_token, client, request, *args, **kwargs) -> bool:
        # DOT does the reuse detection: a rotated token presented again revokes its family.
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        workspace_id = request.refresh_token_instance.workspace_id
        if workspace_id is None:
            return False
        setattr(request, WORKSPACE_ATTR, workspace_id)
        return True

    # DOT builds and saves the token rows itself; the workspace and the code they descend
    # from are stamped on right after, inside save_bearer_token's transaction, so no reader
    # ever sees a token without them.

    def _create_access_token(self, expires, request, token, source_refresh_token=None):
        access_token = super()._create_access_token(expires, request, token, source_refresh_token)
        origin = source_refresh_token.code_checksum if source_refresh_token else code_checksum(request.code)
        self._stamp(AccessToken, access_token, request, origin)
        return access_token

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous_refresh_token):
        refresh_token = super()._create_refresh_token(
            request, refresh_token_code, access_token, previous_refresh_token
        )
        self._stamp(RefreshToken, refresh_token, request, access_token.code_checksum)
        return refresh_token

    @staticmethod
    def _stamp(model, row, request, origin: str) -> None:
        workspace_id = getattr(request, WORKSPACE_ATTR, None)
        model.objects.filter(pk=row.pk).update(workspace_id=workspace_id, code_checksum=origin)
        row.workspace_id, row.code_checksum = workspace_id, origin


def code_checksum(code: str | None) -> str:
    return hashlib.sha256(code.encode()).hexdigest() if code else ""


def revoke_tokens_from_code(code: str | None) -> None:
    checksum = code_checksum(code)
    if not checksum:
        return
    with transaction.atomic(using=router.db_for_write(AccessToken)):
        RefreshToken.objects.filter(code_checksum=checksum, revoked__isnull=True).update(revoked=timezone.now())
        AccessToken.objects.filter(code_checksum=checksum).delete()
