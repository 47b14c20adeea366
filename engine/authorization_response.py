"""RFC 9207 `iss` on every authorization response, error redirects included.

django-oauth-toolkit adds `iss` itself only to a successful authorization response
(`OAuthLibCore.create_authorization_response`, behind COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS);
its error redirects go out without it, and it offers no public function to add it. Its own helper
is used, so both kinds of redirect carry the parameter spelled and placed alike (query, or the
fragment when the response has one; an `iss` already there is replaced, never repeated).

Relies on: `oauth2_provider.oauth2_backends._add_iss_to_redirect(uri, issuer)` (private; its
name and parameters are pinned by tests/test_engine_pins.py)."""

from __future__ import annotations

from oauth2_provider.oauth2_backends import _add_iss_to_redirect

PRIVATE_NAMES = (("oauth2_provider.oauth2_backends", "_add_iss_to_redirect"),)


def with_issuer(redirect_uri: str, issuer: str) -> str:
    """`redirect_uri` carrying exactly one `iss`, equal to `issuer`."""
    return _add_iss_to_redirect(redirect_uri, issuer)
