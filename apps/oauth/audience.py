"""RFC 8707 audiences: which `resource` values Connect accepts and how tokens are matched.

Pure functions (no Django imports) so the rules are testable on their own.
"""

from __future__ import annotations

from collections.abc import Iterable

MCP_PATH = "/mcp"


def normalise(resource: str) -> str:
    # DESIGN.md "MCP and OAuth discovery": a trailing slash is normalised.
    return resource.strip().rstrip("/")


def accepted_audiences(base_url: str) -> frozenset[str]:
    """The REST API (`{base_url}`) and the MCP endpoint (`{base_url}/mcp`)."""
    base = normalise(base_url)
    return frozenset({base, base + MCP_PATH})


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
