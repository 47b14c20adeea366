"""The stream's periodic recheck of the credentials of its open streams: the doorkeeper's batch
check (apps/access/credentials.py `invalid_credentials`), one batch per process per interval,
however many streams are open. A credential revoked, expired or deleted, a suspended workspace,
or an issuer no longer an active member ends the stream."""

from __future__ import annotations

from apps.access.credentials import CredentialRef, invalid_credentials

__all__ = ["CredentialRef", "invalid_credentials"]
