"""RFC 8707 audiences: which resources Connect serves, which each entry point accepts, and how a
token is matched to one.

Pure functions (no Django imports) so the rules are testable on their own. The authorization
server (apps/oauth/views.py) issues tokens only for `accepted_audiences`; the doorkeeper admits
a token only at an entry point that accepts its audience.
"""

from __future__ import annotations

from collections.abc import Iterable

MCP_PATH = "/mcp"


def normalise(resource: str) -> str:
    # A trailing slash is normalised (docs/api/authentication-and-scopes.md).
    return resource.strip().rstrip("/")


def accepted_audiences(base_url: str) -> frozenset[str]:
    """Every audience a token may be issued for: the REST API (`{base_url}`) and the MCP
    endpoint (`{base_url}/mcp`). `/mcp` accepts both (the same credentials as
    REST; docs/api/authentication-and-scopes.md)."""
    base = normalise(base_url)
    return frozenset({base, base + MCP_PATH})


def rest_audiences(base_url: str) -> frozenset[str]:
    """REST and the event stream accept only `{base_url}`: a token for `/mcp` is refused there."""
    return frozenset({normalise(base_url)})


def audience_for_request(resources: Iterable[str], *, base_url: str) -> str | None:
    """The one audience an authorization request names, normalised; None when the request
    names none, several, or one Connect does not serve (→ `invalid_target`)."""
    values = [normalise(r) for r in resources if r and r.strip()]
    if len(set(values)) != 1:
        return None
    audience = values[0]
    return audience if audience in accepted_audiences(base_url) else None


def token_serves(token_resources: Iterable[str], audience: str) -> bool:
    """A token is good only at the exact resource it was issued for; a token without an
    audience is good nowhere (DOT would treat it as unrestricted)."""
    resources = {normalise(r) for r in token_resources}
    return resources == {normalise(audience)}


def served_audience(token_resources: Iterable[str], audiences: Iterable[str]) -> str | None:
    """Which of the accepted `audiences` the token serves (normalised), or None."""
    resources = list(token_resources)
    return next((normalise(a) for a in audiences if token_serves(resources, a)), None)
