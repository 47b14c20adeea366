"""HTTP answers for a request line or header block over daphne's limits (Twisted's HTTPChannel).

Twisted reads the request head line by line with limits of its own: a line over `MAX_LENGTH`
(16 KiB: a long URL) makes `LineReceiver.lineLengthExceeded` close the connection without a
word, and a head over `totalHeadersSize` (16 KiB) or `maxHeaders` (500) headers gets a bare
`400 Bad Request` with no body. `LimitAnsweringChannel` keeps those limits and answers them the
way every other error is answered: `414 {"error": "uri_too_long"}` for the request line,
`431 {"error": "request_header_fields_too_large"}` for the headers, JSON, `Connection: close`.

After answering, the channel stops writing (FIN) but keeps reading and discarding what the
client is still sending, for up to LINGER_SECONDS: closing with unread bytes in the socket would
make the kernel send RST, and a client that is still writing would lose the answer to it.

Relies on (pinned in PRIVATE_NAMES and tests/test_engine_pins.py):
- `twisted.web.http._GenericHTTPChannelProtocol`, which wraps each HTTPChannel that
  `twisted.web.http.HTTPFactory.protocol` builds (we build it around our channel instead);
- `HTTPChannel._receivedHeaderSize`: the bytes of the current request's head read so far, 0
  before its request line (so it tells a request line from a header line), reset per request;
- `HTTPChannel._receivedHeaderCount`: the headers of the current request read so far.
The overridden methods are HTTPChannel's public ones (`lineReceived`, `headerReceived`,
`dataReceived`) and LineReceiver's documented hook `lineLengthExceeded`.

Also, the channel builds its requests without Twisted's form parsing
(`parsePOSTFormSubmission=False`): for every POST with a body, `Request.requestReceived` parses
the Content-Type header with the `email` package (`_parseContentType`) and a form body into
`request.args`, which daphne never reads (it hands the raw body and query string to the ASGI
application). Under /mcp load that parse was about a seventh of the event loop thread's
Python time (py-spy, bench/README.md).

Installed once per daphne process, before it listens: `install()` (connect/asgi.py).
"""

from __future__ import annotations

import orjson
from twisted.web import http

# (module, attribute path within it) of every private name used here.
PRIVATE_NAMES = (
    ("twisted.web.http", "_GenericHTTPChannelProtocol"),
    ("twisted.web.http", "_QUEUED_SENTINEL"),
    ("twisted.web.http", "HTTPChannel._receivedHeaderSize"),
    ("twisted.web.http", "HTTPChannel._receivedHeaderCount"),
)

LINGER_SECONDS = 5.0

# Defined with the other wire codes in apps/core/errors.py (UriTooLong, HeadersTooLarge).
_REASONS = {414: (b"URI Too Long", "uri_too_long"), 431: (b"Request Header Fields Too Large", "request_header_fields_too_large")}


def refusal(status: int) -> bytes:
    """The whole HTTP/1.1 response for a head over a limit."""
    reason, code = _REASONS[status]
    body = orjson.dumps({"error": code})
    head = (
        b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % (status, reason, len(body))
    )
    return head + body


class LimitAnsweringChannel(http.HTTPChannel):
    """An HTTPChannel whose head limits are answered with 414 or 431 instead of a silent close
    or a bare 400. Everything else is HTTPChannel's."""

    _refused = False
    _linger = None
    _request_factory = http.Request

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
        return super().lineReceived(line)

    def headerReceived(self, line: bytes) -> bool:
        if self._receivedHeaderCount >= self.maxHeaders:
            self._refuse(431)
            return False
        return super().headerReceived(line)

    def _refuse(self, status: int) -> bool:
        if self._refused:
            return True
        self._refused = True
        self.setTimeout(None)  # TimeoutMixin: the linger below bounds the connection instead
        self.transport.write(refusal(status))
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


def install() -> None:
    """Every HTTP connection daphne accepts from now on gets a LimitAnsweringChannel."""
    from daphne.http_protocol import HTTPFactory

    HTTPFactory.protocol = _limit_answering_protocol
