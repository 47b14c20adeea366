"""Verifying webhook requests: `verify(headers, raw_body, jwks_url=… | keys=…)`.

`Svc-Signature: t=<unix seconds>,kid=<key id>,v1=<base64url Ed25519 signature>` signs the
bytes `<t>.<raw body>`. `verify` checks it with the published key of that `kid`, refuses a
timestamp more than `tolerance` seconds (default 300) from now, and returns the typed event
(`event.id` is the id to deduplicate on: it is inside the signed bytes). Every failure is its
own `WebhookVerificationError` subclass; answer those with a 400.

Key sets fetched from a `jwks_url` are cached per URL for `cache_seconds` and refetched once
when a `kid` is unknown (after a rotation the new key signs first), at most every
`min_refresh_seconds`, so a flood of made-up kids costs one fetch per interval.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from .errors import (
    InvalidPayload,
    InvalidSignature,
    KeySetUnavailable,
    MalformedSignature,
    MissingSignature,
    TimestampOutsideTolerance,
    UnknownKeyId,
)
from .models import Event

SIGNATURE_HEADER = "Svc-Signature"
TOLERANCE_SECONDS = 300


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def keys_from_jwks(document: Mapping[str, Any]) -> dict[str, VerifyKey]:
    """kid → key for the Ed25519 keys of a JWKS document (others are skipped)."""
    found: dict[str, VerifyKey] = {}
    for jwk in document.get("keys") or []:
        if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519" and jwk.get("kid") and jwk.get("x"):
            try:
                found[jwk["kid"]] = VerifyKey(_b64url(jwk["x"]))
            except (ValueError, binascii.Error, TypeError):
                continue
    return found


class KeySet:
    """A JWKS fetched over HTTP, cached briefly, refetched on an unknown kid."""

    def __init__(self, url: str, *, cache_seconds: float = 300.0, min_refresh_seconds: float = 10.0,
                 timeout: float = 5.0) -> None:
        self.url = url
        self.cache_seconds = cache_seconds
        self.min_refresh_seconds = min_refresh_seconds
        self.timeout = timeout
        self.keys: dict[str, VerifyKey] = {}
        self.fetched_at: float | None = None
        self.fetches = 0
        self._lock = threading.Lock()

    def _fetch(self) -> None:
        try:
            response = httpx.get(self.url, timeout=self.timeout, follow_redirects=False)
            response.raise_for_status()
            self.keys = keys_from_jwks(response.json())
        except (httpx.HTTPError, ValueError) as error:
            raise KeySetUnavailable(f"cannot read the key set at {self.url}: {error}") from error
        self.fetched_at = time.monotonic()
        self.fetches += 1

    def get(self, kid: str) -> VerifyKey | None:
        with self._lock:
            age = None if self.fetched_at is None else time.monotonic() - self.fetched_at
            if age is None or age > self.cache_seconds or (kid not in self.keys and age >= self.min_refresh_seconds):
                self._fetch()
            return self.keys.get(kid)


_keysets: dict[str, KeySet] = {}
_keysets_lock = threading.Lock()


def keyset_for(url: str) -> KeySet:
    """The process-wide cached key set of `url`."""
    with _keysets_lock:
        if url not in _keysets:
            _keysets[url] = KeySet(url)
        return _keysets[url]


def _header(headers: Any, name: str) -> str | None:
    value = headers.get(name) if hasattr(headers, "get") else None
    if isinstance(value, str):
        return value
    wanted = name.lower()
    items = headers.items() if hasattr(headers, "items") else headers
    for key, candidate in items:
        key = key.decode("latin-1") if isinstance(key, bytes) else key
        if key.lower() == wanted:
            return candidate.decode("latin-1") if isinstance(candidate, bytes) else candidate
    return None


def parse_signature(header: str) -> tuple[str, str, list[str]]:
    """(t, kid, [v1 signatures]) of an `Svc-Signature` value."""
    fields: dict[str, str] = {}
    signatures: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "v1":
            signatures.append(value)
        elif name:
            fields[name] = value
    timestamp, kid = fields.get("t", ""), fields.get("kid", "")
    if not timestamp.isdigit() or not kid or not signatures:
        raise MalformedSignature("Svc-Signature must be t=<unix seconds>,kid=<key id>,v1=<signature>")
    return timestamp, kid, signatures


def verify(headers: Any, raw_body: bytes, *, jwks_url: str | None = None,
           keys: KeySet | Mapping[str, Any] | None = None, tolerance: float = TOLERANCE_SECONDS,
           now: float | None = None) -> Event:
    """The event of a genuine webhook request, or a `WebhookVerificationError`.

    `headers`: any mapping (or list of pairs) of the request's headers, any case.
    `raw_body`: the exact bytes received, before any parsing.
    Keys: `jwks_url=` (fetched and cached), or `keys=` — a `KeySet`, or a JWKS document."""
    if (jwks_url is None) == (keys is None):
        raise ValueError("pass exactly one of jwks_url= or keys=")
    if isinstance(raw_body, str):
        raise TypeError("raw_body must be the bytes received, not decoded text")
    header = _header(headers, SIGNATURE_HEADER)
    if not header:
        raise MissingSignature(f"no {SIGNATURE_HEADER} header")
    timestamp, kid, signatures = parse_signature(header)
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > tolerance:
        raise TimestampOutsideTolerance(f"signed at {timestamp}, more than {tolerance:.0f} s from now")

    if jwks_url is not None:
        key = keyset_for(jwks_url).get(kid)
    elif isinstance(keys, KeySet):
        key = keys.get(kid)
    else:
        key = keys_from_jwks(keys).get(kid)  # type: ignore[arg-type]
    if key is None:
        raise UnknownKeyId(f"no published key has kid {kid!r}")

    message = timestamp.encode() + b"." + bytes(raw_body)
    for signature in signatures:
        try:
            key.verify(message, _b64url(signature))
            break
        except (BadSignatureError, ValueError, binascii.Error):
            continue
    else:
        raise InvalidSignature("the signature does not match the body")

    try:
        body = json.loads(raw_body)
    except ValueError as error:
        raise InvalidPayload("the body is not JSON") from error
    if not isinstance(body, dict) or not isinstance(body.get("id"), str) or not isinstance(body.get("type"), str):
        raise InvalidPayload("the body is not an event object")
    data = body.get("data")
    data = data if isinstance(data, dict) else {}
    return Event.from_wire({"sessionId": data.get("sessionId"), **body})
