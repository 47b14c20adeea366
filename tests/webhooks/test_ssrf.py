"""The address rules (engine/ssrf.py): every form the issue names is refused."""

from __future__ import annotations

import ipaddress

import pytest

from engine import ssrf

STRICT = ssrf.Policy()
OPEN = ssrf.Policy(allow_private=True)


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://10.1.2.3/",
        "https://172.16.0.1/",
        "https://192.168.1.1/",
        "https://169.254.169.254/latest/meta-data",  # link-local and metadata
        "https://100.64.0.1/",  # CGNAT
        "https://100.100.100.200/",  # Alibaba metadata (CGNAT, deny list)
        "https://168.63.129.16/",  # Azure wire server: public, deny list
        "https://192.0.0.192/",  # Oracle metadata
        "https://224.0.0.1/",  # multicast
        "https://240.0.0.1/",  # reserved
        "https://255.255.255.255/",
        "https://0.0.0.0/",  # unspecified
        "https://0/",
        "https://198.18.0.1/",  # benchmarking
        "https://192.0.2.1/",  # documentation
        "https://2130706433/",  # decimal 127.0.0.1
        "https://0x7f000001/",  # hex
        "https://0177.0.0.1/",  # octal
        "https://0177.1/",  # octal, short
        "https://127.1/",  # short
        "https://10.1/",
        "https://0xa9.0xfe.0xa9.0xfe/",  # 169.254.169.254 in hex parts
        "https://[::1]/",
        "https://[::]/",
        "https://[fe80::1]/",
        "https://[fc00::1]/",
        "https://[fd00:ec2::254]/",  # AWS metadata over IPv6
        "https://[fec0::1]/",  # site-local
        "https://[ff02::1]/",  # multicast
        "https://[::ffff:127.0.0.1]/",  # IPv4-mapped
        "https://[::ffff:7f00:1]/",
        "https://[::ffff:169.254.169.254]/",
        "https://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
        "https://[64:ff9b::a9fe:a9fe]/",  # NAT64 of the metadata address
        "https://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
        "https://[2002:c0a8:101::1]/",  # 6to4 of 192.168.1.1
        "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo client 127.0.0.1
        "https://[::127.0.0.1]/",  # IPv4-compatible
        "https://[2001:db8::1]/",  # documentation
        "https://localhost/",
        "https://LOCALHOST./",
        "https://api.localhost/",
        "https://metadata.google.internal/",
    ],
)
def test_private_and_internal_destinations_are_refused(url):
    with pytest.raises(ssrf.UnsafeDestination):
        ssrf.check_url(url, STRICT)


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/",  # production is https only
        "ftp://hooks.example.com/",
        "https://user:pw@hooks.example.com/",
        "https:///nohost",
        "not a url",
        "https://1.2.3.999/",  # numeric last label: an invalid address, not a name
        "https://foo.123/",
        "https://08.1.1.1/",  # not octal, not decimal
        "https://256.1.1.1/",
        "https://[zz::1]/",
        "https://hooks.example.com:99999/",
        "",
        None,
    ],
)
def test_malformed_or_insecure_urls_are_refused(url):
    with pytest.raises(ssrf.UnsafeDestination):
        ssrf.check_url(url, STRICT)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/connect",
        "https://93.184.216.34/",
        "https://[2606:2800:220:1::]/x",
        "https://8.8.8.8:8443/",
    ],
)
def test_public_destinations_pass(url):
    assert ssrf.check_url(url, STRICT).scheme == "https"


def test_numeric_spellings_are_read_as_the_address_a_resolver_makes():
    assert ssrf.parse_ipv4_number("2130706433") == ipaddress.IPv4Address("127.0.0.1")
    assert ssrf.parse_ipv4_number("0177.0.0.1") == ipaddress.IPv4Address("127.0.0.1")
    assert ssrf.parse_ipv4_number("0x7f.1") == ipaddress.IPv4Address("127.0.0.1")
    assert ssrf.parse_ipv4_number("127.1") == ipaddress.IPv4Address("127.0.0.1")
    assert ssrf.parse_ipv4_number("10.1.258") == ipaddress.IPv4Address("10.1.1.2")
    assert ssrf.parse_ipv4_number("hooks.example.com") is None


def test_embedded_ipv4_forms_are_judged_by_the_ipv4_they_carry():
    assert ssrf.address_problem(ipaddress.ip_address("64:ff9b::808:808")) is None  # NAT64 of 8.8.8.8
    assert ssrf.address_problem(ipaddress.ip_address("::ffff:8.8.8.8")) is None
    assert ssrf.address_problem(ipaddress.ip_address("2002:808:808::1")) is None  # 6to4 of 8.8.8.8
    assert "carries 10.0.0.1" in ssrf.address_problem(ipaddress.ip_address("::ffff:10.0.0.1"))


def test_every_resolved_address_must_pass():
    ssrf.check_resolved("hooks.example.com", ["93.184.216.34"], STRICT)
    with pytest.raises(ssrf.UnsafeDestination):
        ssrf.check_resolved("hooks.example.com", ["93.184.216.34", "10.0.0.7"], STRICT)
    with pytest.raises(ssrf.UnsafeDestination):
        ssrf.check_resolved("hooks.example.com", [], STRICT)


def test_the_deny_list_is_configurable():
    policy = ssrf.Policy(deny_networks=ssrf.DEFAULT_DENY_NETWORKS + ("93.184.216.0/24",))
    with pytest.raises(ssrf.UnsafeDestination):
        ssrf.check_url("https://93.184.216.34/", policy)


def test_allow_private_lifts_the_address_and_scheme_rules_only():
    assert ssrf.check_url("http://127.0.0.1:8080/hook", OPEN).port == 8080
    assert ssrf.check_url("http://localhost/", OPEN).host == "localhost"
    with pytest.raises(ssrf.UnsafeDestination):
        ssrf.check_url("ftp://127.0.0.1/", OPEN)


# CONNECT_WEBHOOKS_ALLOW_PRIVATE (issue 20, point 8): the development flag lifts https-only and
# the loopback and private ranges, never the deny list nor the ranges where cloud metadata lives.
@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://2852039166/",  # 169.254.169.254, decimal
        "http://0xa9fea9fe/",  # hex
        "http://0xa9.0xfe.0xa9.0xfe/",  # hex parts
        "http://0251.0376.0251.0376/",  # octal parts
        "http://169.254.43518/",  # short form
        "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
        "http://[::ffff:a9fe:a9fe]/",
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64
        "http://[2002:a9fe:a9fe::1]/",  # 6to4
        "http://[::169.254.169.254]/",  # IPv4-compatible
        "http://[fd00:ec2::254]/",  # AWS metadata over IPv6 (inside the private fc00::/7)
        "http://100.100.100.200/",  # Alibaba (inside CGNAT, which the flag lifts)
        "http://168.63.129.16/",  # Azure wire server
        "http://192.0.0.192/",  # Oracle
        "http://169.254.170.2/",  # ECS task metadata: link-local, not lifted
        "http://[fe80::1]/",
        "http://224.0.0.1/",
        "http://0.0.0.0/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.GOOGLE.INTERNAL./",
        "http://metadata.goog/",
        "http://metadata/",
        "http://instance-data/",
    ],
)
def test_allow_private_never_lifts_the_deny_list_or_link_local(url):
    with pytest.raises(ssrf.UnsafeDestination):
        ssrf.check_url(url, OPEN)


def test_allow_private_keeps_an_operators_deny_networks():
    policy = ssrf.Policy(allow_private=True, deny_networks=ssrf.DEFAULT_DENY_NETWORKS + ("10.9.0.0/16",))
    with pytest.raises(ssrf.UnsafeDestination):
        ssrf.check_url("http://10.9.1.1/", policy)
    assert ssrf.check_url("http://10.8.1.1/", policy).literal == ipaddress.ip_address("10.8.1.1")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://127.1/",
        "http://[::1]:9000/",
        "http://[::ffff:127.0.0.1]/",
        "http://10.0.0.5/",
        "http://172.17.0.2/",  # a container network
        "http://192.168.1.20/",
        "http://[fd12:3456::1]/",
        "http://100.64.0.7/",
        "http://localhost:8000/",
        "http://api.localhost/",
        "http://hooks.example.com/",
        "https://93.184.216.34/",
    ],
)
def test_allow_private_lifts_https_only_loopback_and_private_ranges(url):
    ssrf.check_url(url, OPEN)


def test_allow_private_refuses_a_name_that_resolves_to_a_denied_address():
    assert ssrf.check_resolved("hooks.test", ["127.0.0.1", "10.0.0.5"], OPEN)
    for answers in (["169.254.169.254"], ["127.0.0.1", "169.254.169.254"], ["::ffff:169.254.169.254"],
                    ["fd00:ec2::254"], ["fe80::1%eth0"]):
        with pytest.raises(ssrf.UnsafeDestination):
            ssrf.check_resolved("hooks.test", answers, OPEN)
