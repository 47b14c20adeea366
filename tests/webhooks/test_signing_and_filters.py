"""Pure cores: signatures, the retry schedule and webhook filters."""

from __future__ import annotations

import pytest
from nacl.utils import random as random_bytes

from apps.webhooks import filters, schedule, signing


def test_signature_verifies_over_the_raw_body_and_timestamp():
    seed = random_bytes(32)
    keys = {"key_a": signing.public_key_of(seed)}
    body = b'{"id":"evt_1","type":"session.created"}'
    header = signing.sign(seed, kid="key_a", timestamp=1_000_000, body=body)
    assert header.startswith("t=1000000,kid=key_a,v1=")
    assert signing.verify_signature(header, body, keys, now=1_000_100).kid == "key_a"
    with pytest.raises(signing.InvalidSignature):
        signing.verify_signature(header, body + b" ", keys, now=1_000_100)  # re-serialised body
    with pytest.raises(signing.InvalidSignature):
        signing.verify_signature(header, body, keys, now=1_000_000 + 301)  # outside ±5 minutes
    with pytest.raises(signing.InvalidSignature):
        signing.verify_signature(header.replace("t=1000000", "t=1000001"), body, keys, now=1_000_000)
    with pytest.raises(signing.InvalidSignature):
        signing.verify_signature(header, body, {"key_b": keys["key_a"]}, now=1_000_000)  # unknown kid
    with pytest.raises(signing.InvalidSignature):
        signing.verify_signature("garbage", body, keys, now=1_000_000)


def test_jwk_is_an_okp_ed25519_signing_key():
    jwk = signing.jwk("key_a", bytes(32))
    assert jwk == {"kty": "OKP", "crv": "Ed25519", "kid": "key_a", "x": "A" * 43, "use": "sig", "alg": "EdDSA"}


def test_default_schedule_is_seven_attempts():
    delays = schedule.DEFAULT_RETRY_DELAYS
    assert schedule.max_attempts(delays) == 7
    assert [schedule.delay_after(n, delays) for n in range(1, 8)] == [60, 300, 1800, 7200, 28800, 86400, None]
    assert schedule.parse_delays("1,2, 3") == (1, 2, 3)
    with pytest.raises(ValueError):
        schedule.parse_delays("1,-2")


@pytest.mark.parametrize(
    "value",
    [
        [],
        [{"type": "session.created"}] * 21,
        "session.created",
        [{"type": "transcript.segment.created", "sessionId": "s1"}],
        [{"type": "board.updated"}],
        [{"type": "session.deleted"}],
        [{"type": "session.created", "status": ["completed"]}],  # status only on status changes
        [{"type": "session.status_changed", "status": ["completed", "completed"]}],
        [{"type": "session.status_changed", "status": ["archived"]}],
        [{"type": "session.status_changed", "status": []}],
        [{"type": "session.status_changed", "status": "completed"}],
        [{"type": "session.created", "sessionId": ""}],
        [{"type": "session.created", "sessionId": 5}],
        [{"type": "session.created", "extra": 1}],
        [{}],
        ["session.created"],
    ],
)
def test_invalid_filters_are_refused(value):
    with pytest.raises(filters.InvalidFilters):
        filters.validate_filters(value)


def test_and_within_an_entry_or_across_entries():
    rules = filters.validate_filters(
        [
            {"type": "session.status_changed", "status": ["completed", "failed"], "sessionId": "s1"},
            {"type": "session.created"},
        ]
    )
    assert filters.filters_match(rules, {"type": "session.status_changed", "sessionId": "s1", "status": "completed"})
    changed = {"type": "session.status_changed"}
    assert not filters.filters_match(rules, {**changed, "sessionId": "s2", "status": "completed"})
    assert not filters.filters_match(rules, {**changed, "sessionId": "s1", "status": "processing"})
    assert filters.filters_match(rules, {"type": "session.created", "sessionId": "anything"})
