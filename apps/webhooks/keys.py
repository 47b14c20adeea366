"""Signing keys: creation, rotation, retirement and the sealed private halves.

Private halves are sealed with `nacl.secret.SecretBox` under a 32-byte key from
`CONNECT_WEBHOOK_KEY_ENCRYPTION_KEY` (base64) or, when unset, derived from SECRET_KEY — so a
database dump alone never signs. Unsealed seeds live only inside `signing_material()`'s
caller for the length of one signature; nothing prints, logs or serialises them.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from nacl.secret import SecretBox
from nacl.utils import random as random_bytes

from apps.core.ids import new_id
from apps.webhooks import signing
from apps.webhooks.models import SigningKey, SigningKeyStatus

RETIRING_KEY_MIN_DAYS = 30


def _box() -> SecretBox:
    configured = getattr(settings, "CONNECT_WEBHOOK_KEY_ENCRYPTION_KEY", "")
    if configured:
        key = base64.urlsafe_b64decode(configured + "=" * (-len(configured) % 4))
        if len(key) != SecretBox.KEY_SIZE:
            raise ValueError("CONNECT_WEBHOOK_KEY_ENCRYPTION_KEY must be 32 bytes, base64")
    else:
        key = hashlib.sha256(b"connect:webhook-signing-keys:" + settings.SECRET_KEY.encode()).digest()
    return SecretBox(key)


def seal(seed: bytes) -> bytes:
    return bytes(_box().encrypt(seed))


def unseal(sealed: bytes) -> bytes:
    return _box().decrypt(bytes(sealed))


@dataclass(frozen=True)
class SigningMaterial:
    kid: str
    seed: bytes

    def __repr__(self) -> str:  # never show the seed, even in a traceback's locals
        return f"SigningMaterial(kid={self.kid!r})"


def _new_key(now) -> SigningKey:
    seed = random_bytes(32)
    return SigningKey(
        kid=new_id("key_"),
        public_key=signing.b64url(signing.public_key_of(seed)),
        sealed_private_key=seal(seed),
        status=SigningKeyStatus.ACTIVE,
        created_at=now,
    )


def active_key() -> SigningKey:
    """The active key, created on first need. Concurrent first needs race on the one-active
    constraint; the loser reads the winner's key."""
    key = SigningKey.objects.filter(status=SigningKeyStatus.ACTIVE).first()
    if key is not None:
        return key
    try:
        with transaction.atomic():
            key = _new_key(timezone.now())
            key.save(force_insert=True)
            return key
    except IntegrityError:
        return SigningKey.objects.get(status=SigningKeyStatus.ACTIVE)


_seeds: dict[str, bytes] = {}  # kid → unsealed seed, per process: unsealing is the costly part


def signing_material() -> SigningMaterial:
    """The active key's kid and seed. The active kid is read on every call (one indexed row),
    so a rotation takes effect at once in every worker; only the unsealing is cached."""
    key = active_key()
    seed = _seeds.get(key.kid)
    if seed is None:
        if len(_seeds) > 16:
            _seeds.clear()
        seed = _seeds[key.kid] = unseal(key.sealed_private_key)
    return SigningMaterial(kid=key.kid, seed=seed)


@transaction.atomic
def rotate() -> SigningKey:
    """A new active key; the previous one becomes retiring (still published, no longer signing)."""
    now = timezone.now()
    SigningKey.objects.select_for_update().filter(status=SigningKeyStatus.ACTIVE).update(
        status=SigningKeyStatus.RETIRING, retiring_at=now
    )
    key = _new_key(now)
    key.save(force_insert=True)
    return key


@transaction.atomic
def retire(*, older_than_days: int = RETIRING_KEY_MIN_DAYS) -> list[str]:
    """Unpublish retiring keys that have been retiring for at least `older_than_days` (never
    fewer than 30: receivers cache the key set) and erase their private halves."""
    if older_than_days < RETIRING_KEY_MIN_DAYS:
        raise ValueError(f"retiring keys stay published at least {RETIRING_KEY_MIN_DAYS} days")
    cutoff = timezone.now() - timedelta(days=older_than_days)
    keys = list(
        SigningKey.objects.select_for_update().filter(status=SigningKeyStatus.RETIRING, retiring_at__lte=cutoff)
    )
    for key in keys:
        key.status = SigningKeyStatus.RETIRED
        key.retired_at = timezone.now()
        key.sealed_private_key = b""
        key.save(update_fields=["status", "retired_at", "sealed_private_key"])
    return [k.kid for k in keys]


def published_keys() -> list[SigningKey]:
    return list(
        SigningKey.objects.filter(status__in=[SigningKeyStatus.ACTIVE, SigningKeyStatus.RETIRING]).only(
            "kid", "public_key", "status", "created_at"
        )
    )


def jwks() -> dict[str, list[dict[str, str]]]:
    """The published key set (docs/api/webhooks.md), the active key first."""
    active_key()
    keys = sorted(published_keys(), key=lambda k: (k.status != SigningKeyStatus.ACTIVE, -k.created_at.timestamp()))
    return {"keys": [signing.jwk(k.kid, signing.b64url_decode(k.public_key)) for k in keys]}
