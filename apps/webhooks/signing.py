"""Webhook signatures (docs/api/webhooks.md, "The signature"), as pure functions over bytes.

`Svc-Signature: t=<unix seconds>,kid=<key id>,v1=<base64url Ed25519 signature>`, the signature
taken over the UTF-8 bytes of `<t>.<exact raw body>`. Receivers verify the raw bytes they got,
never re-serialised JSON; docs/webhooks.md carries a receiver built on `verify_signature`'s rules.
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass
from typing import Mapping

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey as Ed25519PrivateKey
from nacl.signing import VerifyKey

DEFAULT_TOLERANCE_SECONDS = 300


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signed_bytes(timestamp: int, body: bytes) -> bytes:
    return str(timestamp).encode("ascii") + b"." + body


@functools.lru_cache(maxsize=4)
def _private_key(seed: bytes) -> Ed25519PrivateKey:
    """Deriving the key pair from its seed costs as much as a signature: once per key, not per
    delivery (the active key and, during a rotation, the one before it)."""
    return Ed25519PrivateKey(seed)


def sign(seed: bytes, *, kid: str, timestamp: int, body: bytes) -> str:
    """The Svc-Signature header value for `body`, signed with the private key whose 32-byte
    seed is `seed`."""
    signature = _private_key(seed).sign(signed_bytes(timestamp, body)).signature
    return f"t={timestamp},kid={kid},v1={b64url(signature)}"


def public_key_of(seed: bytes) -> bytes:
    return bytes(Ed25519PrivateKey(seed).verify_key)


def jwk(kid: str, public_key: bytes) -> dict[str, str]:
    """RFC 8037 public JWK for an Ed25519 key."""
    return {"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64url(public_key), "use": "sig", "alg": "EdDSA"}


@dataclass(frozen=True)
class ParsedSignature:
    timestamp: int
    kid: str
    signatures: tuple[bytes, ...]


class InvalidSignature(ValueError):
    pass


def parse_signature_header(value: str) -> ParsedSignature:
    timestamp, kid, signatures = None, None, []
    for item in value.split(","):
        name, sep, text = item.strip().partition("=")
        if not sep:
            raise InvalidSignature("malformed header")
        if name == "t":
            if not text.isdigit():
                raise InvalidSignature("malformed timestamp")
            timestamp = int(text)
        elif name == "kid":
            kid = text
        elif name == "v1":
            try:
                signatures.append(b64url_decode(text))
            except ValueError:
                raise InvalidSignature("malformed signature") from None
    if timestamp is None or not kid or not signatures:
        raise InvalidSignature("missing t, kid or v1")
    return ParsedSignature(timestamp, kid, tuple(signatures))


def verify_signature(
    header: str,
    body: bytes,
    public_keys: Mapping[str, bytes],
    *,
    now: float,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
) -> ParsedSignature:
    """Raise InvalidSignature unless `header` signs `body` with one of `public_keys` (by kid)
    and its timestamp is within `tolerance` seconds of `now`."""
    parsed = parse_signature_header(header)
    if abs(now - parsed.timestamp) > tolerance:
        raise InvalidSignature("timestamp outside the tolerance")
    public_key = public_keys.get(parsed.kid)
    if public_key is None:
        raise InvalidSignature("unknown kid")
    message = signed_bytes(parsed.timestamp, body)
    for signature in parsed.signatures:
        try:
            VerifyKey(public_key).verify(message, signature)
            return parsed
        except (BadSignatureError, ValueError):
            continue
    raise InvalidSignature("no signature verifies")
