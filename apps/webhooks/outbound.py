"""The HTTP client deliveries use: it dials only addresses that pass the SSRF rules.

httpcore lets a connection pool take its own network backend (`ConnectionPool(network_backend=…)`,
httpcore/_sync/connection_pool.py); `GuardedBackend.connect_tcp` resolves the host once, checks
every address (engine/ssrf.py) and connects to a checked one. The URL keeps the original
host name, so TLS SNI and certificate checks (httpcore/_sync/connection.py passes
`server_hostname=sni_hostname or host` to `start_tls`) and the `Host` header use the name, while
the socket goes to the address that was checked — there is no second lookup to rebind.

Every read and write is bounded by what is left of the attempt's total deadline (10 s), not
only by a per-operation timeout, so a receiver that drips bytes cannot hold a worker longer.
Redirects are never followed (httpcore does not follow them); a response body is read only when
short (≤ 4 KiB, to keep the connection alive) and never stored. An attempt that fails says what
happened in a sentence naming the host and port (`describe`), never the URL's path or query,
a header or the body, which may carry secrets.
"""

from __future__ import annotations

import contextvars
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Callable, Iterable
from urllib.parse import urlsplit

import httpcore

from engine import ssrf

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("webhook_deadline", default=None)


def resolve(host: str, port: int) -> list[str]:
    """All addresses of `host` (one lookup). Tests replace this to simulate DNS answers."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(info[4][0] for info in infos))


def _remaining(timeout: float | None) -> float:
    deadline = _deadline.get()
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        raise httpcore.ReadTimeout("the attempt's total deadline passed")
    if timeout is None:
        return left if left is not None else 10.0
    return min(timeout, left) if left is not None else timeout


class BlockedDestination(httpcore.ConnectError):
    """The host resolved to an address the SSRF rules refuse (checked at connect time)."""


class DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _remaining(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _remaining(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:
        return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _remaining(timeout)))

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class GuardedBackend(httpcore.NetworkBackend):
    def __init__(self, policy: ssrf.Policy, resolver: Callable[[str, int], Iterable[str]] | None = None) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        name, literal = ssrf.parse_host(host)
        try:
            ssrf.check_host_name(name, self._policy)
            if literal is not None:
                addresses = [ssrf.check_address(literal, self._policy)]
            else:
                resolver = self._resolver or resolve
                try:
                    answers = resolver(name, port)
                except OSError as exc:
                    raise httpcore.ConnectError(f"cannot resolve {name}: {exc}") from exc
                addresses = ssrf.check_resolved(name, answers, self._policy)
        except ssrf.UnsafeDestination as exc:
            raise BlockedDestination(str(exc)) from exc
        last_error: Exception | None = None
        for address in addresses:  # every one was checked; dial them in the resolver's order
            try:
                stream = self._inner.connect_tcp(
                    str(address), port, timeout=_remaining(timeout), local_address=local_address,
                    socket_options=socket_options,
                )
                return DeadlineStream(stream)
            except httpcore.ConnectError as exc:
                last_error = exc
        raise last_error or httpcore.ConnectError(f"cannot connect to {name}")

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise BlockedDestination("unix sockets are not webhook destinations")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


MAX_DRAINED_BODY_BYTES = 4096


@dataclass(frozen=True)
class Outcome:
    http_status: int | None
    error: str  # "" on success; else an AttemptError value
    duration_ms: int
    detail: str = ""  # what happened, for people (`describe`); "" on success


def where(url: str) -> str:
    """`host:port` of a URL, the port its scheme's default when it names none. Never the
    user info, path or query."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname or "?"
    except ValueError:
        return "the endpoint's host"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def describe(url: str, error: str, *, http_status: int | None = None, exc: BaseException | None = None,
             timeout: float = 10.0) -> str:
    """A readable sentence for a failed attempt: connection refused to host:port, a TLS
    failure, a timeout after N s, the HTTP status answered. The text of an exception is used
    only where it is the network's own (an SSL reason, a blocked address), never a URL."""
    target = where(url)
    chain = _chain(exc) if exc is not None else []
    seconds = f"{timeout:g} s"
    if error == "http_error":
        return f"{target} answered HTTP {http_status}; only a 2xx acknowledges a delivery"
    if error == "redirect":
        return (f"{target} answered HTTP {http_status} (a redirect, which is never followed); "
                "set the endpoint's URL to the final address")
    if error == "blocked_destination":
        reason = next((str(e) for e in chain if isinstance(e, ssrf.UnsafeDestination)), "")
        return (f"{target} is not a permitted destination" + (f" ({reason})" if reason else "")
                + ": private, loopback, link-local and internal addresses are refused")
    if error == "timeout":
        if any(isinstance(e, httpcore.ConnectTimeout) for e in chain):
            return f"no connection to {target} within {seconds}"
        return f"no complete response from {target} within {seconds}"
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain):
        why = next(e.verify_message for e in chain if isinstance(e, ssl.SSLCertVerificationError))
        return f"TLS failure with {target}: its certificate was not accepted ({why})"
    if any(isinstance(e, ssl.SSLError) for e in chain) or "SSL" in " ".join(str(e) for e in chain):
        return f"TLS failure with {target}: the handshake did not complete"
    text = " ".join(str(e) for e in chain)
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "Connection refused" in text:
        return f"connection refused by {target}: nothing listens there"
    if "cannot resolve" in text:
        return f"cannot resolve {where(url).rsplit(':', 1)[0]}: the name has no address (DNS)"
    if any(isinstance(e, (httpcore.RemoteProtocolError, httpcore.ReadError)) for e in chain):
        return f"{target} closed the connection without a complete HTTP response"
    return f"network error talking to {target}"


class Sender:
    """One per worker process: a connection pool whose connections were all dialled through
    GuardedBackend, reused across deliveries to the same origin."""

    def __init__(self, policy: ssrf.Policy, timeout: float = 10.0, resolver=None) -> None:
        self.timeout = timeout
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl.create_default_context(),
            network_backend=GuardedBackend(policy, resolver),
            max_connections=20,
            max_keepalive_connections=20,
            keepalive_expiry=30.0,
        )

    def post(self, url: str, headers: list[tuple[str, str]], body: bytes) -> Outcome:
        started = time.monotonic()
        token = _deadline.set(started + self.timeout)
        timeouts = {"connect": self.timeout, "read": self.timeout, "write": self.timeout, "pool": self.timeout}
        try:
            with self._pool.stream(
                "POST", url, headers=headers, content=body, extensions={"timeout": timeouts}
            ) as response:
                status = response.status
                # A short body is drained so the connection can be reused; a longer one is
                # never read (closing the response drops the connection). Nothing is stored.
                drained = 0
                for chunk in response.iter_stream():
                    drained += len(chunk)
                    if drained > MAX_DRAINED_BODY_BYTES:
                        break
            error = "" if 200 <= status < 300 else ("redirect" if 300 <= status < 400 else "http_error")
            detail = describe(url, error, http_status=status) if error else ""
            return Outcome(status, error, _ms_since(started), detail)
        except BlockedDestination as exc:
            return self._failed(url, "blocked_destination", exc, started)
        except httpcore.TimeoutException as exc:
            return self._failed(url, "timeout", exc, started)
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol, OSError, ssl.SSLError) as exc:
            return self._failed(url, "network_error", exc, started)
        finally:
            _deadline.reset(token)

    def _failed(self, url: str, error: str, exc: BaseException, started: float) -> Outcome:
        return Outcome(None, error, _ms_since(started), describe(url, error, exc=exc, timeout=self.timeout))

    def close(self) -> None:
        self._pool.close()


def _ms_since(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))
