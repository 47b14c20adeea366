"""Which redirect URIs a client may register (RFC 8252, RFC 9700 §4.1).

Allowed: https to any host; plain http only to loopback (127.0.0.1, [::1], localhost; any
port); private-use schemes of native apps (`com.example.app:/cb`, `cursor://cb`). Refused:
schemes that run or read content in the browser (`javascript:`, `data:`, `file:` …) and
plain http anywhere else. Pure functions, no Django imports.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})

# Schemes a browser would execute, render or resolve locally instead of handing the code to
# an app, plus web schemes that are not redirect targets at all.
REFUSED_SCHEMES = frozenset(
    {"javascript", "data", "file", "vbscript", "about", "blob", "filesystem", "view-source", "ftp", "ws", "wss"}
)
SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.\-]*$")


def redirect_uri_problem(uri: str) -> str | None:
    """Why `uri` cannot be registered, or None when it can."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return "is not a valid URI"
    scheme = parts.scheme.lower()
    if not scheme or not SCHEME_RE.match(scheme):
        return "must be an absolute URI"
    if "#" in uri:
        return "must not contain a fragment"
    if "@" in parts.netloc:
        return "must not contain user information"
    if scheme in REFUSED_SCHEMES:
        return f"uses the {scheme}: scheme, which is not allowed"
    if scheme == "https":
        return None if parts.hostname else "must name a host"
    if scheme == "http":
        if parts.hostname in LOOPBACK_HOSTS:
            return None
        return "may use plain http only for a loopback address (127.0.0.1, [::1] or localhost)"
    # A native app's private-use scheme (RFC 8252 §7.1).
    if not (parts.netloc or parts.path):
        return "must have a path after the scheme"
    return None


def allowed_schemes(uris: list[str]) -> list[str]:
    """Schemes DOT may redirect to for a client with these registered URIs."""
    schemes = {"https", "http"}
    schemes.update(urlsplit(u).scheme.lower() for u in uris if redirect_uri_problem(u) is None)
    return sorted(schemes)


def redirect_target(uri: str) -> str:
    """What the member is shown as the place the code goes: the redirect URI's host name (the
    MCP security considerations: "MUST clearly display the redirect URI hostname"), or the
    scheme of a native app's private-use URI, which has none."""
    parts = urlsplit(uri)
    if parts.hostname:
        return parts.hostname
    return f"{parts.scheme}: (an app on this device)" if parts.scheme else uri


def loopback_only(uris: list[str]) -> bool:
    """True when every registered redirect URI is a loopback address: any program on the
    member's machine could be listening there, whatever name the client gives itself."""
    hosts = [urlsplit(u).hostname for u in uris]
    return bool(hosts) and all(host in LOOPBACK_HOSTS for host in hosts)
