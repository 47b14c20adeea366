import pytest

from apps.core.origins import normalise_origin, parse_policy

BASE = "https://connect.example.com"


def test_default_allows_own_origin_and_loopback_on_any_port():
    policy = parse_policy("", BASE)
    assert policy.allows("https://connect.example.com")
    assert policy.allows("http://127.0.0.1:6274")
    assert policy.allows("http://localhost:5173")
    assert policy.allows("http://[::1]:8080")
    assert not policy.allows("https://evil.example")
    assert not policy.allows("http://connect.example.com")  # scheme is part of the origin


def test_listed_origins_only_when_set():
    policy = parse_policy("https://app.example, https://inspector.example:8443", BASE)
    assert policy.allows("https://app.example")
    assert policy.allows("HTTPS://App.Example")
    assert policy.allows("https://inspector.example:8443")
    assert not policy.allows("https://inspector.example")
    assert not policy.allows("http://127.0.0.1:6274")
    assert not policy.allows(BASE)


def test_star_allows_any_web_origin_but_not_null():
    policy = parse_policy("*", BASE)
    assert policy.allows("https://anything.example")
    assert not policy.allows("null")


@pytest.mark.parametrize(
    "value", ["null", "", "file://", "https://a.example/path", "https://user@a.example", "javascript:alert(1)",
              "https://a.example:99999"]
)
def test_values_that_are_not_origins(value):
    assert normalise_origin(value) is None
    assert not parse_policy("*", BASE).allows(value)


def test_a_lookalike_of_loopback_is_not_loopback():
    policy = parse_policy("", BASE)
    assert not policy.allows("http://127.0.0.1.evil.example")
    assert not policy.allows("http://localhost.evil.example:80")


def test_bad_setting_is_refused():
    with pytest.raises(ValueError):
        parse_policy("https://ok.example, not an origin", BASE)
