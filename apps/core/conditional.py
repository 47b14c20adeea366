"""Conditional requests (RFC 9110 §13): strong entity tags computed from what an answer is made
of (row versions, segment counts), never from its rendered body, and the `If-None-Match` check.

The views (apps/recordings/api.py) compute a tag before reading what the body needs; a match is
answered `304 Not Modified` with no body. The rate limit gives the request back only when it
named the tag (`names_tag`): `If-None-Match: *` is answered `304` too, as the RFC says, but costs
a request like any other, since it proves no earlier answer.

Every tagged answer carries `Cache-Control: private, no-cache`: a shared cache must never hand
one workspace's answer to another client, and a private one revalidates every time (cheap with
a 304) so an append is seen on the next request.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.utils.http import parse_etags

CACHE_CONTROL = "private, no-cache"


def strong_etag(*parts: Any) -> str:
    """A quoted strong tag for the answer made of `parts` (their `repr`s: ids, counts,
    timestamps, the representation's name)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()
    return f'"{digest}"'


def none_match(header: str | None, etag: str) -> bool:
    """True when `If-None-Match: header` names `etag` or is `*`: answer `304`."""
    return bool(header) and (parse_etags(header) == ["*"] or names_tag(header, etag))


def names_tag(header: str | None, etag: str) -> bool:
    """True when `If-None-Match: header` lists `etag` itself: the client holds that answer. The
    comparison is the weak one the RFC prescribes for If-None-Match, so a tag a compressing
    layer weakened (`W/"…"`, Django's GZipMiddleware) still matches."""
    if not header:
        return False
    return any(tag != "*" and tag.removeprefix("W/") == etag.removeprefix("W/") for tag in parse_etags(header))
