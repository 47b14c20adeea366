"""The Client ID Metadata Document fetcher (apps/oauth/cimd.py) against a real HTTPS server on
loopback: it refuses every destination the webhook guard refuses, however spelled or resolved,
redirects, documents that are too big or too slow, plain http, and a document that is not
about its own URL. Tests reach loopback only through the testing CA setting (`testing`)."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys

import pytest
from oauth2_provider.cimd import CIMDError
from oauth2_provider.settings import oauth2_settings

from apps.oauth.cimd import GuardedMetadataFetcher, testing_ca_file
from tests.oauth.cimd_server import Route, document
from tests.servers import ROOT
from tests.webhooks import test_ssrf as webhook_ssrf

LIMIT = 5 * 1024


def webhook_refused_urls() -> list[str]:
    """Every URL the webhook guard's own tests prove refused, with a document path."""
    test = webhook_ssrf.test_private_and_internal_destinations_are_refused
    urls = next(mark.args[1] for mark in test.pytestmark if mark.name == "parametrize")
    return [url + "client.json" if url.endswith("/") else url for url in urls]


@pytest.fixture
def short_timeout(settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 1}


def fetch(client_id: str):
    return GuardedMetadataFetcher().fetch(client_id)


def refused(client_id: str, because: str = "") -> str:
    with pytest.raises(CIMDError) as error:
        fetch(client_id)
    assert because in str(error.value), str(error.value)
    return str(error.value)


@pytest.fixture
def fake_dns(monkeypatch):
    """Names of our choosing resolve to addresses of our choosing (no DNS server here); every
    other name goes to the real resolver."""
    answers: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                    for a in answers[host]]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


# --- configuration ----------------------------------------------------------------------------

def test_the_library_calls_our_fetcher_with_the_drafts_size_limit():
    assert oauth2_settings.CIMD_ENABLED
    assert oauth2_settings.CIMD_METADATA_FETCHER is GuardedMetadataFetcher
    assert oauth2_settings.CIMD_MAX_DOCUMENT_SIZE == LIMIT


def test_production_settings_never_trust_a_testing_ca(tmp_path):
    """connect/settings.py reads the testing CA from no environment variable: a deployment that
    sets one anyway, or names the setting, gets None."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "connect.settings", "CONNECT_DEVELOPMENT": "0",
           "SECRET_KEY": "x" * 50, "CONNECT_CIMD_TESTING_CA_FILE": str(tmp_path / "ca.pem"),
           "CONNECT_TEST_CIMD_CA_FILE": str(tmp_path / "ca.pem")}
    code = ("import django; django.setup(); from django.conf import settings; "
            "from apps.oauth.cimd import testing_ca_file; "
            "print(settings.CONNECT_CIMD_TESTING_CA_FILE, testing_ca_file())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "None"]


def test_the_testing_ca_counts_only_in_development(settings, tmp_path):
    settings.CONNECT_CIMD_TESTING_CA_FILE = str(tmp_path / "ca.pem")
    assert testing_ca_file() == str(tmp_path / "ca.pem")
    settings.CONNECT_DEVELOPMENT = False
    assert testing_ca_file() is None


# --- destinations -----------------------------------------------------------------------------

@pytest.mark.parametrize("client_id", webhook_refused_urls())
def test_every_destination_the_webhook_guard_refuses_is_refused(client_id):
    refused(client_id, "refused")


@pytest.mark.parametrize("client_id", [
    "https://[::7f00:1]/client.json",  # IPv4-compatible 127.0.0.1
    "https://[::a9fe:a9fe]/client.json",  # IPv4-compatible metadata address
    "https://[64:ff9b:1::a9fe:a9fe]/client.json",  # local-use NAT64 of the metadata address
    "https://168.63.129.16/client.json",  # Azure wire server: a public address
    "https://192.0.0.192/client.json",  # Oracle metadata
    "https://[fec0::1]/client.json",  # site-local
])
def test_addresses_the_librarys_own_fetcher_would_dial_are_refused(client_id):
    refused(client_id, "refused")


def test_an_operators_deny_networks_hold_for_documents_too(settings, fake_dns):
    settings.CONNECT_WEBHOOK_DENY_NETWORKS = ["203.0.113.0/24", "8.8.8.0/24"]
    fake_dns["agent.example"] = ["8.8.8.8"]
    refused("https://agent.example/client.json", "deny list")


def test_a_loopback_server_is_refused_outside_tests_and_never_asked(server):
    client_id = server.serve_document("/client.json")
    refused(client_id, "loopback")
    refused(server.url("/client.json", "localhost"), "localhost")
    assert server.hits == []


def test_a_real_name_resolving_to_loopback_is_refused(server):
    name = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 443, proto=socket.IPPROTO_TCP)}
    except socket.gaierror:
        pytest.skip("this machine's name does not resolve")
    if all(ipaddress.ip_address(a.split("%")[0]).is_global for a in addresses):
        pytest.skip("this machine's name resolves to public addresses only")
    server.serve_document("/client.json")
    refused(server.url("/client.json", name), "refused")
    assert server.hits == []


@pytest.mark.parametrize("answers", [
    ["169.254.169.254"],
    ["::ffff:10.0.0.1"],
    ["64:ff9b::a9fe:a9fe"],
    ["93.184.215.14", "127.0.0.1"],  # one bad answer refuses the host
    ["2606:2800:21f:cb07:6820:80da:af6b:8b2c", "fd00::1"],
])
def test_a_name_resolving_to_an_internal_address_is_refused_before_any_dial(server, fake_dns, answers):
    fake_dns["agent.example"] = answers
    refused("https://agent.example/client.json", "refused")
    assert server.hits == []


@pytest.mark.parametrize("client_id", [
    "http://agent.example/client.json",
    "https://agent.example",  # no path
    "https://agent.example/client.json#frag",
    "https://agent.example/a/../client.json",
    "https://user@agent.example/client.json",
    "https://agent.example:99999/client.json",
])
def test_urls_the_draft_forbids_are_refused(client_id):
    refused(client_id)


def test_plain_http_is_refused_even_where_tests_allow_loopback(testing):
    testing.serve_document("/client.json")
    refused(testing.url("/client.json").replace("https://", "http://"), "https")
    assert testing.hits == []


# --- documents (tests allow loopback and trust their CA) --------------------------------------

def test_a_good_document_is_read_with_its_cache_lifetime(testing):
    client_id = testing.serve_document("/client.json")
    testing.routes["/client.json"].headers["Cache-Control"] = "public, max-age=600"
    metadata, max_age = fetch(client_id)
    assert metadata["client_id"] == client_id and metadata["client_name"] == "CIMD Agent"
    assert max_age == 600
    assert testing.hits == ["/client.json"]


def test_the_certificate_must_name_the_host(testing, fake_dns):
    fake_dns["agent.example"] = ["127.0.0.1"]  # our server, whose certificate is for localhost
    client_id = f"https://agent.example:{testing.server_address[1]}/client.json"
    testing.routes["/client.json"] = Route(body=document(client_id))
    refused(client_id, "could not be fetched")


def padded(client_id: str, size: int) -> bytes:
    body = document(client_id, padding="")
    return document(client_id, padding="x" * (size - len(body)))


@pytest.mark.parametrize("chunked", [False, True])
def test_a_document_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(testing, chunked):
    client_id = testing.url("/client.json")
    testing.routes["/client.json"] = Route(body=padded(client_id, LIMIT), chunked=chunked)
    assert len(testing.routes["/client.json"].body) == LIMIT
    assert fetch(client_id)[0]["client_id"] == client_id
    testing.routes["/client.json"] = Route(body=padded(client_id, LIMIT + 1), chunked=chunked)
    refused(client_id, "larger than 5120 bytes")


def test_a_huge_document_is_refused_without_being_read(testing):
    client_id = testing.url("/client.json")
    testing.routes["/client.json"] = Route(body=padded(client_id, 2_000_000))
    refused(client_id, "larger than")


def test_a_body_trickled_past_the_deadline_is_refused(testing, short_timeout):
    # Each piece comes well inside a per-read timeout; the whole takes three times the deadline.
    client_id = testing.url("/client.json")
    body = document(client_id)
    testing.routes["/client.json"] = Route(body=body, drip_bytes=max(1, len(body) // 30), drip_seconds=0.1)
    refused(client_id, "too long")


def test_headers_trickled_past_the_deadline_are_refused(testing, short_timeout):
    client_id = testing.url("/client.json")
    testing.routes["/client.json"] = Route(body=document(client_id), drip_headers=True)
    refused(client_id, "too long")


def test_a_server_that_never_answers_is_refused(testing, short_timeout):
    client_id = testing.url("/client.json")
    testing.routes["/client.json"] = Route(body=document(client_id), stall_seconds=3)
    refused(client_id, "too long")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_never_followed(testing, status):
    client_id = testing.url("/client.json")
    elsewhere = testing.serve_document("/elsewhere.json")
    for location in (elsewhere, "https://169.254.169.254/latest/meta-data", "https://[::ffff:127.0.0.1]/"):
        testing.routes["/client.json"] = Route(status=status, headers={"Location": location})
        refused(client_id, "redirects are not followed")
    assert "/elsewhere.json" not in testing.hits


@pytest.mark.parametrize("claimed", [
    lambda url: "https://agent.example/client.json",
    lambda url: url + "/",
    lambda url: url + "?x=1",
    lambda url: url.replace("https://", "HTTPS://"),  # equal after normalisation, not as strings
    lambda url: url.replace("https://", "http://"),
    lambda url: None,
])
def test_a_document_that_is_not_about_its_own_url_is_refused(testing, claimed):
    client_id = testing.url("/client.json")
    testing.routes["/client.json"] = Route(body=document(claimed(client_id)))
    refused(client_id, "not the URL it was fetched from")


@pytest.mark.parametrize("route", [
    Route(status=404, body=b"{}"),
    Route(status=500, body=b"{}"),
    Route(body=b"<html></html>", headers={"Content-Type": "text/html"}),
    Route(body=b"[1, 2]"),
    Route(body=b"{not json"),
])
def test_anything_but_a_json_object_answered_200_is_refused(testing, route):
    testing.routes["/client.json"] = route
    refused(testing.url("/client.json"))
