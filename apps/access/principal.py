from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from apps.tenancy.models import INGEST_SCOPE

if TYPE_CHECKING:
    from apps.tenancy.models import Membership, Workspace


@dataclass(frozen=True)
class Principal:
    """Who is asking: built once per request by authentication, read by everything else."""

    workspace: Workspace
    scopes: frozenset[str]
    kind: Literal["api_key", "oauth"]
    credential_id: str
    issuer: Membership
    audience: str | None = None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def is_ingest(self) -> bool:
        """An ingest credential: admitted at the ingest API only, and the only one admitted there
        (apps/access/admission.py)."""
        return INGEST_SCOPE in self.scopes
