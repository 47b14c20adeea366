"""engine/daphne_stream.py against the installed Twisted: the write-through is taken only
on a plain TCP transport whose buffer it can see, and a Twisted without one of the private
names it reads degrades to the ordinary `Request.write` path instead of failing a stream."""

from __future__ import annotations

import inspect
import socket
from types import SimpleNamespace

import pytest
from twisted.internet import reactor, tcp
from twisted.internet.protocol import Protocol
from twisted.web.http import Request
from twisted.web.test.requesthelper import DummyChannel

from engine import daphne_stream


@pytest.fixture
def connection():
    ours, theirs = socket.socketpair()
    transport = tcp.Connection(ours, Protocol(), reactor)
    yield transport
    ours.close()
    theirs.close()


class Stream:
    paused = False
    closed = None

    def wake(self) -> None:
        pass

    def close(self, reason: str) -> None:
        self.closed = reason


def test_a_plain_tcp_transport_can_be_written_through(connection):
    assert daphne_stream.can_write_through(connection)


def test_tls_or_another_transport_is_not(connection):
    connection.TLS = True
    assert not daphne_stream.can_write_through(connection)
    assert not daphne_stream.can_write_through(DummyChannel.TCP())


def test_a_twisted_without_a_private_buffer_name_is_not(connection):
    del connection._tempDataLen  # as if Twisted renamed it
    assert not daphne_stream.can_write_through(connection)


def test_a_live_stream_request_lets_go_of_its_headers_and_body_and_still_ends_cleanly():
    channel = DummyChannel()
    request = Request(channel, False)
    request.requestHeaders.addRawHeader(b"content-type", b"application/json")
    request.gotLength(12)
    request.handleContentChunk(b'{"id": 1234}')
    request.clean_headers = [(b"content-type", b"application/json")]  # daphne's copy
    body = request.content
    daphne_stream.forget_request_input(request)
    assert list(request.requestHeaders.getAllRawHeaders()) == [] and request.clean_headers == []
    assert request.content is None and body.closed
    request.write(b"data: one\n\n")
    request.finish()  # twisted.web's cleanup with the body gone
    assert request.finished and b"data: one" in channel.transport.written.getvalue()


def test_direct_write_goes_through_request_write_and_stops_once_finished():
    request = Request(DummyChannel(), False)
    write = daphne_stream.direct_write(request, daphne_stream.Producer(Stream()))
    write(b"data: one\n\n")
    assert b"data: one\n\n" in request.channel.transport.written.getvalue()
    request.finished = True
    before = request.channel.transport.written.getvalue()
    write(b"data: two\n\n")
    assert request.channel.transport.written.getvalue() == before


def _chunked_request_on(transport) -> Request:
    transport.connected = True  # as for an accepted connection (tcp.Server)
    request = Request(DummyChannel(), False)
    request.channel.transport = transport
    request.chunked = True
    return request


def _read_all(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    data = b""
    while True:
        try:
            part = sock.recv(1 << 20)
        except BlockingIOError:
            return data
        if not part:
            return data
        data += part


def test_write_through_sends_the_chunk_on_the_socket_and_frames_a_shared_batch_once():
    pairs = [socket.socketpair() for _ in range(2)]
    try:
        transports = [tcp.Connection(ours, Protocol(), reactor) for ours, _ in pairs]
        writes = [daphne_stream.direct_write(_chunked_request_on(t), daphne_stream.Producer(Stream()))
                  for t in transports]
        batch = b"data: one\n\n"
        for write in writes:
            write(batch)
        assert daphne_stream._last_framed[0] is batch  # framed once, reused for the second stream
        for (_, theirs), transport in zip(pairs, transports):
            assert _read_all(theirs) == b"b\r\ndata: one\n\n\r\n"
            assert not transport._tempDataLen and not transport.dataBuffer  # all of it was sent
        writes[0](b"data: two\n\n")  # another object, equal or not, is framed on its own
        assert _read_all(pairs[0][1]) == b"b\r\ndata: two\n\n\r\n"
    finally:
        for ours, theirs in pairs:
            ours.close()
            theirs.close()


def test_write_through_buffers_what_the_socket_does_not_take_in_order():
    ours, theirs = socket.socketpair()
    try:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        ours.setblocking(False)
        transport = tcp.Connection(ours, Protocol(), reactor)
        write = daphne_stream.direct_write(_chunked_request_on(transport), daphne_stream.Producer(Stream()))
        first, second = b"a" * 200_000, b"b" * 10
        write(first)
        assert transport._tempDataLen > 0  # the socket took part; the rest waits in Twisted's buffer
        write(second)  # behind it, never beside it
        waiting = b"".join(transport._tempDataBuffer)
        received = _read_all(theirs)
        assert received + waiting == b"30d40\r\n" + first + b"\r\n" + b"a\r\n" + second + b"\r\n"
    finally:
        ours.close()
        theirs.close()


def test_write_through_to_a_connection_the_peer_has_closed_does_not_raise():
    ours, theirs = socket.socketpair()
    try:
        transport = tcp.Connection(ours, Protocol(), reactor)
        write = daphne_stream.direct_write(_chunked_request_on(transport), daphne_stream.Producer(Stream()))
        theirs.close()
        write(b"data: one\n\n")  # EPIPE: handed to Twisted's buffer, which finds the loss itself
        write(b"data: two\n\n")
        assert transport._tempDataLen > 0
    finally:
        ours.close()


def test_a_request_without_the_private_disconnected_flag_is_not_written_through(connection):
    class Renamed(Request):  # as a Twisted that renamed `_disconnected` would hand over
        @property
        def _disconnected(self):
            raise AttributeError("_disconnected")

    request = Renamed(DummyChannel(), False)
    request.channel.transport = connection
    write = daphne_stream.direct_write(request, daphne_stream.Producer(Stream()))
    assert daphne_stream.can_write_through(connection) and write.__name__ == "write_now"


def test_a_request_without_the_private_disconnected_flag_is_still_judged():
    # A request-shaped object as a Twisted that renamed `_disconnected` would hand over.
    renamed = SimpleNamespace(finished=False, channel=object())
    assert daphne_stream._usable(renamed)
    renamed.finished = True
    assert not daphne_stream._usable(renamed)


def test_without_a_producer_there_is_no_direct_write():
    assert daphne_stream.direct_write(Request(DummyChannel(), False), None) is None
    assert daphne_stream.direct_write(None, daphne_stream.Producer(Stream())) is None


def test_the_producer_pauses_resumes_and_stops_the_stream():
    stream = Stream()
    producer = daphne_stream.Producer(stream)
    producer.pauseProducing()
    assert stream.paused
    producer.resumeProducing()
    assert not stream.paused
    producer.stopProducing()
    assert stream.paused and stream.closed == "client_gone"


def test_private_names_name_real_attributes(connection):
    """What the engine pin test checks for every module, here for this one on its own."""
    owners = {
        "twisted.internet.abstract.FileDescriptor": connection,
        "twisted.internet.tcp.Connection": connection,
        "twisted.web.http.Request": Request,
    }
    for where, name in daphne_stream.PRIVATE_NAMES:
        if where == "daphne.http_protocol.WebRequest":  # set per instance (__init__, process)
            from daphne.http_protocol import WebRequest

            assert f"self.{name} = " in inspect.getsource(WebRequest), (where, name)
            continue
        assert hasattr(owners[where], name), (where, name)
