"""Test-only reverse proxy for conformance tools that cannot send a Bearer header: forwards
every request to the Connect server unchanged (Host and Origin included, so the DNS-rebinding
checks still see what the tool sent) and adds `Authorization: Bearer <key>` when absent.

    python bench/mcp_auth_proxy.py --listen 127.0.0.1:9100 --upstream http://127.0.0.1:8000 --key svc_…

Loopback only; for bench/mcp_conformance.sh, never for production.
"""

from __future__ import annotations

import argparse
import http.client
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def make_handler(upstream: str, key: str):
    target = urlsplit(upstream)

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            if "authorization" not in {k.lower() for k in headers}:
                headers["Authorization"] = f"Bearer {key}"
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                connection.request(self.command, self.path, body=body, headers=headers)
                response = connection.getresponse()
                if (response.getheader("Content-Type") or "").startswith("text/event-stream"):
                    return self.relay(connection, response)
                data = response.read()
            finally:
                connection.close()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def relay(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
            """A stream: headers now, then each chunk as it comes; the body ends with the connection."""
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            connection.sock.settimeout(None)  # quiet between heartbeats
            try:
                while chunk := response.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError:
                pass  # the client left, or the server ended the stream

        do_GET = do_POST = do_DELETE = do_PUT = do_OPTIONS = forward

        def log_message(self, *args) -> None:  # quiet
            pass

    return Proxy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", default="127.0.0.1:9100")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    if host not in {"127.0.0.1", "localhost", "::1"}:
        raise SystemExit("the proxy listens on loopback only")
    ThreadingHTTPServer((host, int(port)), make_handler(args.upstream, args.key)).serve_forever()


if __name__ == "__main__":
    main()
