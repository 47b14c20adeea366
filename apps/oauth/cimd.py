"""Client ID Metadata Documents: the fetcher django-oauth-toolkit calls for a `client_id` that is
an https URL (its `CIMD_METADATA_FETCHER` setting; the library resolves, checks the document's
`client_id` again, stores the client and backs off on failure).

The server fetches a URL a stranger chose, before anyone has logged in, so the fetch obeys the
webhooks' SSRF rules (engine/ssrf.py) and the draft (draft-ietf-oauth-client-id-metadata-document):
https only; the URL, every address its host resolves to and the address dialled pass the rules
(one bad answer refuses the host); no redirect is followed; 200 and JSON only; at most
`CIMD_MAX_DOCUMENT_SIZE` bytes read; one deadline (`CIMD_FETCH_TIMEOUT_SECONDS`) for resolving,
connecting, the headers and the body, however slowly they come; the document's `client_id`
is its URL, character for character.

Tests fetch from loopback with their own CA only through `testing_ca_file()`, which production
cannot turn on (see there)."""

from __future__ import annotations

import json
import re
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from oauth2_provider.cimd import CIMDError
from oauth2_provider.settings import oauth2_settings
from urllib3.connection import HTTPSConnection

from engine import ssrf

MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)", re.IGNORECASE)


def testing_ca_file() -> str | None:
    """The CA a test's loopback document server is signed by, or None (always, in production).

    `CONNECT_CIMD_TESTING_CA_FILE` is None in connect/settings.py and read from no environment
    variable; only a test settings module sets it, and it counts only while CONNECT_DEVELOPMENT
    is on too, which a deployment cannot run with (connect/settings.py refuses the development
    secret without it). When it counts, loopback and private addresses may be fetched (the
    draft's development exception) and that CA is the only one trusted."""
    ca_file = getattr(settings, "CONNECT_CIMD_TESTING_CA_FILE", None)
    return ca_file if ca_file and settings.CONNECT_DEVELOPMENT else None


def policy() -> ssrf.Policy:
    """The webhooks' rules, the operator's extra deny networks included."""
    extra = tuple(getattr(settings, "CONNECT_WEBHOOK_DENY_NETWORKS", ()))
    return ssrf.Policy(allow_private=testing_ca_file() is not None, deny_networks=ssrf.DEFAULT_DENY_NETWORKS + extra)


def checked_url(client_id: str, rules: ssrf.Policy) -> ssrf.Destination:
    """The draft's client identifier rules (https, a path, no fragment, no dot segments; no
    userinfo and a valid port, which check_url tests) and the SSRF rules for its host."""
    try:
        destination = ssrf.check_url(client_id, rules)
    except ssrf.UnsafeDestination as refused:
        raise CIMDError(f"client_id URL refused: {refused}") from None
    parts = urlsplit(client_id)
    if destination.scheme != "https":
        raise CIMDError("client_id URL must use https")
    if parts.fragment or "#" in client_id:
        raise CIMDError("client_id URL must not contain a fragment")
    if not parts.path or any(segment in (".", "..") for segment in parts.path.split("/")):
        raise CIMDError("client_id URL must have a path without dot segments")
    return destination


def resolved_addresses(destination: ssrf.Destination, rules: ssrf.Policy) -> list[ssrf.IPAddress]:
    if destination.literal is not None:
        return [destination.literal]
    try:
        infos = socket.getaddrinfo(destination.host, destination.port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as error:
        raise CIMDError(f"could not resolve the client_id host: {error}") from None
    try:
        return ssrf.check_resolved(destination.host, dict.fromkeys(info[4][0] for info in infos), rules)
    except ssrf.UnsafeDestination as refused:
        raise CIMDError(f"client_id host refused: {refused}") from None


def max_age(cache_control: str) -> int:
    """Seconds the document may be kept: its max-age (no-store/no-cache: the floor), clamped to
    the library's CIMD_METADATA_MIN_AGE_SECONDS..CIMD_METADATA_MAX_AGE_SECONDS."""
    floor = oauth2_settings.CIMD_METADATA_MIN_AGE_SECONDS
    ceiling = oauth2_settings.CIMD_METADATA_MAX_AGE_SECONDS
    lowered = cache_control.lower()
    match = MAX_AGE.search(cache_control)
    age = floor if ("no-store" in lowered or "no-cache" in lowered) else int(match.group(1)) if match else ceiling
    return max(floor, min(age, ceiling))


class Watchdog:
    """Cuts a connection at the deadline: shuts its descriptor down underneath TLS, so a read
    blocked in another thread sees end of stream. Whatever was read after `fired` is truncated
    (http.client takes a cut in the headers for their end), so it is never used."""

    def __init__(self, connection: HTTPSConnection, seconds: float) -> None:
        self.connection = connection
        self.ends = time.monotonic() + seconds
        self.fired = threading.Event()
        self.timer = threading.Timer(seconds, self.cut)
        self.timer.daemon = True

    def cut(self) -> None:
        self.fired.set()
        sock = self.connection.sock
        if sock is not None:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def check(self) -> None:
        """Past the deadline, whoever noticed first (the socket's own timeout may end a read
        before the timer thread runs on a busy machine), the answer is that it took too long."""
        if self.fired.is_set() or time.monotonic() >= self.ends:
            raise CIMDError("client_id document took too long")

    def __enter__(self) -> Watchdog:
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()


class GuardedMetadataFetcher:
    """`fetch(client_id)` → `(document, max_age_seconds)`, or `CIMDError` saying why (logged by
    the library, never shown to the client, which only learns that the client is unknown)."""

    def fetch(self, client_id: str) -> tuple[dict, int]:
        rules = policy()
        destination = checked_url(client_id, rules)
        deadline = time.monotonic() + oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        addresses = resolved_addresses(destination, rules)
        problems = []
        for address in addresses:
            if time.monotonic() >= deadline:
                break
            try:
                ssrf.check_address(address, rules)  # what is dialled, checked again
            except ssrf.UnsafeDestination as refused:
                raise CIMDError(f"client_id address refused: {refused}") from None
            try:
                return self.fetch_from(address, destination, client_id, deadline)
            except _Unreachable as error:
                problems.append(str(error))  # the next address may answer
        raise CIMDError(f"client_id document could not be fetched: {'; '.join(problems) or 'out of time'}")

    def fetch_from(self, address, destination: ssrf.Destination, client_id: str, deadline: float) -> tuple[dict, int]:
        parts = urlsplit(client_id)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        ca_file = testing_ca_file()
        context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
        connection = HTTPSConnection(
            str(address), destination.port, timeout=deadline - time.monotonic(),
            server_hostname=destination.host, ssl_context=context,
        )
        # One deadline for everything: a server that trickles its headers or body a byte at a
        # time never lets a per-read timeout expire, so the watchdog cuts the connection.
        try:
            with Watchdog(connection, deadline - time.monotonic()) as watchdog:
                try:
                    connection.request("GET", target, headers={
                        "Host": parts.netloc, "Accept": "application/json, application/*+json",
                    }, preload_content=False)
                    response = connection.getresponse()
                except (OSError, urllib3.exceptions.HTTPError, ValueError) as error:
                    watchdog.check()
                    raise _Unreachable(f"{address}: {error}") from None
                watchdog.check()
                return self.read_document(response, client_id, watchdog)
        finally:
            connection.close()

    def read_document(self, response, client_id: str, watchdog: Watchdog) -> tuple[dict, int]:
        if response.status != 200:
            redirect = " (redirects are not followed)" if 300 <= response.status < 400 else ""
            raise CIMDError(f"client_id document answered HTTP {response.status}{redirect}")
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media_type != "application/json" and not (media_type.startswith("application/") and media_type.endswith("+json")):
            raise CIMDError(f"client_id document is not JSON (Content-Type {media_type!r})")
        limit = oauth2_settings.CIMD_MAX_DOCUMENT_SIZE
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise CIMDError(f"client_id document is larger than {limit} bytes")
        try:
            body = response.read(limit + 1)
        except (OSError, urllib3.exceptions.HTTPError, ValueError) as error:
            watchdog.check()
            raise CIMDError(f"client_id document could not be read: {error}") from None
        watchdog.check()
        if len(body) > limit:
            raise CIMDError(f"client_id document is larger than {limit} bytes")
        try:
            document = json.loads(body)
        except ValueError:
            raise CIMDError("client_id document is not valid JSON") from None
        if not isinstance(document, dict):
            raise CIMDError("client_id document is not a JSON object")
        if document.get("client_id") != client_id:
            # Simple string comparison (RFC 3986 §6.2.1), as the draft requires; the library
            # checks it again before storing the client.
            raise CIMDError("the document's client_id is not the URL it was fetched from")
        return document, max_age(response.headers.get("Cache-Control", ""))


class _Unreachable(Exception):
    """This address did not answer (refused, reset, TLS failed); another of the host's may."""
