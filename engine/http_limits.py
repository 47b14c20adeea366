"""Our own answers to request heads daphne's HTTP parser (Twisted's HTTPChannel) refuses.

Twisted closes a request line over `MAX_LENGTH` without a word, and answers a head over
`totalHeadersSize` or `maxHeaders`, or a malformed one (a request target that is not printable
ASCII, a CR in a header value, Content-Length with Transfer-Encoding or not a non-negative
integer, a malformed chunk), with a bare `400`. `LimitAnsweringChannel` keeps those rules and
answers as every error is answered: JSON `{"error", "detail", "requestId"}`, `X-Request-Id`,
`Connection: close` (414 `uri_too_long`, 431 `request_header_fields_too_large`, 400
`invalid_request`). It then stops writing but reads and drops what the client still sends, for
up to LINGER_SECONDS: closing with unread bytes would reset the connection and lose the answer.
It also builds requests without Twisted's form parsing, which daphne never reads.

Relies on the private names in PRIVATE_NAMES (pinned in tests/test_engine_pins.py); the other
overrides are HTTPChannel's and LineReceiver's public methods. Installed once per daphne
process, before it listens: `install()` (connect/asgi.py).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

import orjson
from twisted.web import http

logger = logging.getLogger(__name__)

# (module, attribute path within it) of every private name used here.
PRIVATE_NAMES = (
    ("twisted.web.http", "_GenericHTTPChannelProtocol"),
    ("twisted.web.http", "_QUEUED_SENTINEL"),
    ("twisted.web.http", "HTTPChannel._receivedHeaderSize"),
    ("twisted.web.http", "HTTPChannel._receivedHeaderCount"),
    ("twisted.web.http", "HTTPChannel._respondToBadRequestAndDisconnect"),
)

LINGER_SECONDS = 5.0

# Defined with the other wire codes in apps/core/errors.py (InvalidRequest, UriTooLong, HeadersTooLarge).
_REASONS = {
    400: (b"Bad Request", "invalid_request"),
    414: (b"URI Too Long", "uri_too_long"),
    431: (b"Request Header Fields Too Large", "request_header_fields_too_large"),
}

# Why a head was refused, by the part of it the parser was reading. Never the client's bytes.
DETAILS = {
    "request line": "request line: must be `METHOD target HTTP/1.1`, the target printable ASCII"
    " (percent-encode other characters)",
    "header": "headers: a header line is malformed (a name that is not a token, or a value holding CR, LF or NUL)",
    "framing": "headers: Content-Length must be a non-negative integer, Transfer-Encoding chunked, and not both",
    "body": "body: malformed chunked encoding",
}
_FRAMING_HEADERS = (b"content-length", b"transfer-encoding")


def _fresh_request_id() -> str:
    return "req_" + secrets.token_hex(12)  # the door's form; connect/asgi.py installs the door's own


_new_request_id: Callable[[], str] = _fresh_request_id


def refusal(status: int, request_id: str, detail: str | None = None) -> bytes:
    """The whole HTTP/1.1 response for a refused head."""
    reason, code = _REASONS[status]
    body = {"error": code} if detail is None else {"error": code, "detail": detail}
    payload = orjson.dumps({**body, "requestId": request_id})
    head = (
        b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
        b"X-Request-Id: %s\r\nConnection: close\r\n\r\n" % (status, reason, len(payload), request_id.encode("ascii"))
    )
    return head + payload


class LimitAnsweringChannel(http.HTTPChannel):
    """An HTTPChannel whose refusals are answered in JSON: 414 or 431 for a head over a limit,
    400 for a malformed one, instead of a silent close or a bare 400. Everything else is
    HTTPChannel's."""

    _refused = False
    _linger = None
    _request_factory = http.Request
    _reading = "request line"  # the part of the request the parser reads, for a 400's detail

    # daphne's HTTPFactory sets `requestFactory` (its WebRequest) on each protocol it builds;
    # the channel keeps the factory and builds requests through it without form parsing.
    @property
    def requestFactory(self):  # noqa: N802 - Twisted's name
        return self._formless_request

    @requestFactory.setter
    def requestFactory(self, factory) -> None:  # noqa: N802
        self._request_factory = factory

    def _formless_request(self, channel, queued=http._QUEUED_SENTINEL):
        return self._request_factory(channel, queued, parsePOSTFormSubmission=False)

    def dataReceived(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: read and drop until the client closes or the linger ends
        super().dataReceived(data)

    def lineLengthExceeded(self, line: bytes) -> None:
        self._refuse(414 if self._receivedHeaderSize == 0 else 431)

    def lineReceived(self, line: bytes):
        if self._refused:
            return True  # stop LineReceiver's loop over lines already buffered
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            return self._refuse(414 if self._receivedHeaderSize == 0 else 431)
        self._reading = "request line" if self._receivedHeaderSize == 0 else "header"
        return super().lineReceived(line)

    def headerReceived(self, line: bytes) -> bool:
        if self._receivedHeaderCount >= self.maxHeaders:
            self._refuse(431)
            return False
        name = line.split(b":", 1)[0].strip().lower()
        self._reading = "framing" if name in _FRAMING_HEADERS else "header"
        return super().headerReceived(line)

    def rawDataReceived(self, data: bytes) -> None:
        self._reading = "body"
        super().rawDataReceived(data)

    def _respondToBadRequestAndDisconnect(self) -> None:  # noqa: N802 - Twisted's name
        self._refuse(400)

    def _refuse(self, status: int) -> bool:
        if self._refused:
            return True
        self._refused = True
        self.setTimeout(None)  # TimeoutMixin: the linger below bounds the connection instead
        request_id = _new_request_id()
        detail = DETAILS[self._reading] if status == 400 else None
        logger.info("request head refused", extra={"status": status, "request_id": request_id})
        self.transport.write(refusal(status, request_id, detail))
        if hasattr(self.transport, "loseWriteConnection"):
            self.transport.loseWriteConnection()
            self._linger = self.callLater(LINGER_SECONDS, self.transport.abortConnection)
        else:
            self.transport.loseConnection()
        return True

    def connectionLost(self, reason) -> None:
        if self._linger is not None and self._linger.active():
            self._linger.cancel()
        super().connectionLost(reason)


def _limit_answering_protocol(factory: http.HTTPFactory) -> http._GenericHTTPChannelProtocol:  # noqa: ARG001
    return http._GenericHTTPChannelProtocol(LimitAnsweringChannel())


def install(new_request_id: Callable[[], str] | None = None) -> None:
    """Every HTTP connection daphne accepts from now on gets a LimitAnsweringChannel; its
    refusals carry ids from `new_request_id` (the door's, so that they look like every other)."""
    from daphne.http_protocol import HTTPFactory

    global _new_request_id
    _new_request_id = new_request_id or _fresh_request_id
    HTTPFactory.protocol = _limit_answering_protocol
