"""A client's metadata-document host for the tests: a real HTTPS server on loopback, with a
certificate from a throwaway CA (for `localhost` and 127.0.0.1), serving whatever each path is
told to serve — a good document, a huge one, a slow one, a redirect — and remembering which
paths were asked for."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Route:
    """What one path answers. `drip` sends the body `drip_bytes` at a time, `drip_seconds`
    apart; `stall_seconds` waits before anything; `drip_headers` trickles a header line."""

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    drip_bytes: int = 0
    drip_seconds: float = 0.0
    stall_seconds: float = 0.0
    drip_headers: bool = False
    chunked: bool = False


def document(client_id: str, **metadata) -> bytes:
    body = {
        "client_id": client_id,
        "client_name": "CIMD Agent",
        "redirect_uris": ["http://127.0.0.1:8765/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **metadata,
    }
    return json.dumps(body).encode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(ca.pem, server.pem, server-key.pem): a CA and a server certificate it signs."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder().subject_name(_name("Connect test CA")).issuer_name(_name("Connect test CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder().subject_name(_name("localhost")).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class DocumentServer(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Route]
    hits: list[str]
    ca_file: Path

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.server_address[1]}{path}"

    def serve_document(self, path: str, host: str = "127.0.0.1", **metadata) -> str:
        client_id = self.url(path, host)
        self.routes[path] = Route(body=document(client_id, **metadata))
        return client_id


class Handler(BaseHTTPRequestHandler):
    server: DocumentServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        route = self.server.routes.get(self.path)
        if route is None:
            route = Route(status=404, body=b"{}")
        try:
            self.answer(route)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            pass  # the fetcher hung up: what the slow routes are for

    def answer(self, route: Route) -> None:
        time.sleep(route.stall_seconds)
        self.send_response(route.status)
        if route.drip_headers:
            self.flush_headers()
            for _ in range(40):  # a header line that never ends in time
                self.wfile.write(b"X-Slow: a" if _ == 0 else b"a")
                self.wfile.flush()
                time.sleep(0.1)
        for name, value in route.headers.items():
            self.send_header(name, value)
        if route.chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(route.body), 1024):
                piece = route.body[start:start + 1024]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(route.body)))
        self.end_headers()
        step = route.drip_bytes or len(route.body) or 1
        for start in range(0, len(route.body), step):
            self.wfile.write(route.body[start:start + step])
            self.wfile.flush()
            time.sleep(route.drip_seconds)


@contextmanager
def document_server(directory: Path) -> Iterator[DocumentServer]:
    """An HTTPS server on 127.0.0.1 (a free port), stopped after."""
    ca_file, cert_file, key_file = make_certificates(directory)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server = DocumentServer(("127.0.0.1", 0), Handler, bind_and_activate=True)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.routes, server.hits, server.ca_file = {}, [], ca_file
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
