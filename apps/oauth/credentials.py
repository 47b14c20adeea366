"""OAuth access tokens as Principals. Placeholder until the OAuth issue lands: every
non-`svc_` bearer is unknown, which is `401 unauthorized`."""

from __future__ import annotations

from apps.core.errors import Unauthorized


def principal_for_access_token(token: str, *, audience: str):
    raise Unauthorized()
