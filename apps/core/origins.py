"""Which browser origins may call Connect: CORS on the Bearer-only paths and the Origin check
at /mcp (DNS-rebinding protection) read this one policy, configured by CONNECT_ALLOWED_ORIGINS.

Pure: no Django imports, so it is tested on its own; `allowed_origin` binds it to settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def normalise_origin(origin: str) -> str | None:
    """`scheme://host[:port]` in lower case, or None when the value is not a web origin
    (browsers send `null` for opaque origins; that is never allowed by name)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in {"http", "https"} or not parts.hostname or parts.path not in {"", "/"}:
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


@dataclass(frozen=True)
class OriginPolicy:
    any_origin: bool
    origins: frozenset[str]
    loopback_any_port: bool

    def allows(self, origin: str) -> bool:
        normal = normalise_origin(origin)
        if normal is None:
            return False
        if self.any_origin or normal in self.origins:
            return True
        return self.loopback_any_port and urlsplit(normal).hostname in LOOPBACK_HOSTS


def parse_policy(value: str, base_url: str) -> OriginPolicy:
    """The setting's value: comma-separated origins, or `*` for any. Empty means the default:
    the service's own origin plus loopback origins on any port (local tools, the Inspector)."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        base = normalise_origin(base_url)
        return OriginPolicy(any_origin=False, origins=frozenset({base} if base else ()), loopback_any_port=True)
    if "*" in items:
        return OriginPolicy(any_origin=True, origins=frozenset(), loopback_any_port=True)
    origins = {normalise_origin(item) for item in items}
    if None in origins:
        bad = [item for item in items if normalise_origin(item) is None]
        raise ValueError(f"CONNECT_ALLOWED_ORIGINS: not an origin: {', '.join(bad)}")
    return OriginPolicy(any_origin=False, origins=frozenset(origins), loopback_any_port=False)


@lru_cache(maxsize=1)
def _policy(value: str, base_url: str) -> OriginPolicy:
    return parse_policy(value, base_url)


def allowed_origin(origin: str) -> bool:
    from django.conf import settings

    return _policy(settings.CONNECT_ALLOWED_ORIGINS, settings.CONNECT_BASE_URL).allows(origin)
