"""OAuth access tokens as Principals (contract §5, §7).

Checks in the order every credential is checked (apps/tenancy/authentication.py): the token
itself — known, unexpired, bound to a workspace and to this audience — (401), then its
workspace (404 workspace_not_found), then the member who granted it (403 forbidden).
Two queries: the token with its workspace, then the membership with its user.
"""

from __future__ import annotations

import hashlib

from apps.core.errors import Forbidden, Unauthorized, WorkspaceNotFound
from apps.oauth.audience import normalise, token_serves
from apps.oauth.models import AccessToken
from apps.tenancy.models import Membership
from apps.tenancy.principal import Principal


def token_checksum(token: str) -> str:
    # DOT 3.x looks tokens up by this checksum; only the checksum is stored (TOKEN_STORAGE gate).
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def principal_for_access_token(token: str, *, audience: str | tuple[str, ...]) -> Principal:
    """`audience` is the resource the request is addressed to: `{base_url}` for REST; a tuple
    when several are accepted — /mcp takes `{base_url}` (contract §5.3: the same credentials
    as REST) and `{base_url}/mcp` (DESIGN.md "MCP and OAuth discovery")."""
    audiences = (audience,) if isinstance(audience, str) else audience
    access_token = (
        AccessToken.objects.select_related("workspace").filter(token_checksum=token_checksum(token)).first()
    )
    served = (
        next((a for a in audiences if token_serves(access_token.resource, a)), None) if access_token else None
    )
    if (
        access_token is None
        or access_token.is_expired()
        or access_token.workspace is None
        or access_token.user_id is None
        or served is None
    ):
        raise Unauthorized()
    workspace = access_token.workspace
    if not workspace.is_available:
        raise WorkspaceNotFound()
    membership = (
        Membership.objects.select_related("user").filter(workspace=workspace, user_id=access_token.user_id).first()
    )
    if membership is None or not membership.is_active or not membership.user.is_active:
        raise Forbidden()
    membership.workspace = workspace  # already loaded; spares the lazy query
    return Principal(
        workspace=workspace,
        scopes=frozenset(access_token.scope.split()),
        kind="oauth",
        credential_id=str(access_token.pk),
        issuer=membership,
        audience=normalise(served),
    )
