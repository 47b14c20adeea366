"""connect/engine/daphne_stream.py against the installed Twisted: the write-through is taken only
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

from connect.engine import daphne_stream


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


def test_direct_write_goes_through_request_write_and_stops_once_finished():
    request = Request(DummyChannel(), False)
    write = daphne_stream.direct_write(request, daphne_stream.Producer(Stream()))
    write(b"data: one\n\n")
    assert b"data: one\n\n" in request.channel.transport.written.getvalue()
    request.finished = True
    before = request.channel.transport.written.getvalue()
    write(b"data: two\n\n")
    assert request.channel.transport.written.getvalue() == before


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
        if where == "daphne.http_protocol.WebRequest":  # set per instance, in __init__
            from daphne.http_protocol import WebRequest

            assert f"self.{name} = " in inspect.getsource(WebRequest.__init__), (where, name)
            continue
        assert hasattr(owners[where], name), (where, name)
