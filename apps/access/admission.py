"""The one entry point every request passes: `admit(authorization, audiences=…)`.

Order, the same at REST, the event stream and `/mcp`: the credential (401), its workspace (404
workspace_not_found), its issuer's membership (403 forbidden), then the rate limit (429
rate_limited, counted in the credential's and the workspace's buckets). Scopes are the
endpoint's business afterwards (`require_scope`), so a refused scope still costs a request.
One scope rule is the door's own: an ingest credential (`Principal.is_ingest`) is admitted at
the ingest API only (`ingest=True`), every other credential everywhere else; the wrong door
answers `403 insufficient_scope` naming the scopes that door needs (`needs`; the ingest API's
is `svc:ingest:write`), so no read entry point (REST, the stream, `/mcp`) has to know that
ingest keys exist.

Runs synchronously (it reads the database): consumers call it on their database thread, as one
call. The queries are the credential's (one for an API key, two for a token) plus one counting
round trip; admission adds none of its own.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from apps.access.credentials import authenticate_bearer
from apps.access.principal import Principal
from apps.access.ratelimit import RateDecision, check_rate_limits
from apps.access.render import error_headers
from apps.core import context, metrics
from apps.core.errors import (
    READ_CREDENTIAL_AT_INGEST,
    ApiError,
    InsufficientScope,
    RateLimited,
    ingest_key_reads_nothing,
)
from apps.tenancy.models import INGEST_SCOPE


def wrong_door(*, ingest: bool, needs: Collection[str] = ()) -> InsufficientScope:
    """The refusal of a credential at the other door: a read credential at the ingest API
    (`ingest`), or an ingest key at a read entry point that needs `needs`."""
    if ingest:
        return InsufficientScope((INGEST_SCOPE,), detail=READ_CREDENTIAL_AT_INGEST)
    return InsufficientScope(needs, detail=ingest_key_reads_nothing(needs))


@dataclass(frozen=True)
class Admission:
    """Either a principal (with its rate decision, None when limits are off) or the error to
    render; a 429 carries both the error and the decision that refused it."""

    principal: Principal | None
    rate: RateDecision | None
    error: ApiError | None

    def headers(self) -> list[tuple[str, str]]:
        """The headers every answer to this request carries: the rate limit's, and on a
        refusal the challenge when it is a 401."""
        if self.error is not None:
            return error_headers(self.error, self.rate)
        return self.rate.headers() if self.rate is not None else []


def admit(
    authorization: str | None, *, audiences: Collection[str], ingest: bool = False, needs: Collection[str] = ()
) -> Admission:
    """`audiences`: the resources this entry point accepts (apps/oauth/audience.py).
    `ingest`: this is the ingest API, which admits ingest credentials only. `needs`: the scopes
    this read entry point needs, named when it refuses an ingest key."""
    return admit_each(authorization, audiences=audiences, count=1, ingest=ingest, needs=needs)[0]


def admit_each(
    authorization: str | None,
    *,
    audiences: Collection[str],
    count: int,
    ingest: bool = False,
    needs: Collection[str] = (),
) -> list[Admission]:
    """`admit` for `count` requests bearing the same Authorization header, asked together (a
    burst of event stream opens, apps/stream/hub.py): the credential is looked up once, and the
    requests are counted in one round trip, each decided as if counted on its own, in order."""
    try:
        principal = authenticate_bearer(authorization, audience=audiences)
    except ApiError as error:
        return [Admission(principal=None, rate=None, error=error)] * count
    # The request's log context names the credential by id (on a thread that did not copy the
    # request's context, e.g. the event stream's, the caller notes it).
    context.note_principal(principal.workspace.id, principal.credential_id)
    return [_decided(principal, rate, ingest, needs) for rate in check_rate_limits(principal, count)]


def _decided(principal: Principal, rate: RateDecision | None, ingest: bool, needs: Collection[str]) -> Admission:
    if rate is not None and not rate.allowed:
        metrics.RATE_LIMITED.inc()
        return Admission(principal=principal, rate=rate, error=RateLimited())
    if principal.is_ingest != ingest:
        return Admission(principal=principal, rate=rate, error=wrong_door(ingest=ingest, needs=needs))
    return Admission(principal=principal, rate=rate, error=None)
