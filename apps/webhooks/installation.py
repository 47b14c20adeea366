"""An installation's right to deliver: the credential that created the endpoint, checked by the
doorkeeper's rules (apps/access/credentials.py) with the scope deliveries need.

An API key installation is that key. An OAuth installation is the member's grant to the
application for this workspace: it outlives the token that created the endpoint, and holds
while an unexpired access token or an unrevoked refresh token of it remains.
"""

from __future__ import annotations

from apps.access.credentials import CredentialRef, invalid_credentials
from apps.webhooks.models import WebhookEndpoint

INSTALLATION_SCOPE = "svc:sessions:read"


def installation_credential(endpoint: WebhookEndpoint) -> CredentialRef:
    if endpoint.credential_kind == "api_key":
        kind, credential_id = "api_key", endpoint.credential_id
    else:
        kind, credential_id = "oauth_grant", str(endpoint.oauth_application_id or "")
    return CredentialRef(
        kind=kind,
        credential_id=credential_id,
        membership_id=endpoint.created_by_id,
        workspace_id=endpoint.workspace_id,
    )


def unauthorized_installations(endpoints: list[WebhookEndpoint]) -> set[str]:
    """Ids of the endpoints whose installation no longer holds: one batch check for all."""
    refs = {endpoint.id: installation_credential(endpoint) for endpoint in endpoints}
    invalid = invalid_credentials(set(refs.values()), scope=INSTALLATION_SCOPE)
    return {endpoint_id for endpoint_id, ref in refs.items() if ref in invalid}
