"""Response compression: Django's GZipMiddleware, for bodies worth it.

gzip when the client sends `Accept-Encoding: gzip` and the body is at least `MIN_LENGTH`
bytes (1 KiB; below that the header and the CPU cost more than the bytes saved — Django's own
threshold is 200 bytes). The answer then carries `Content-Encoding: gzip` and
`Vary: Accept-Encoding` (Django sets both, weakens a strong `ETag` to `W/"…"`, as RFC 9110
asks of a changed representation, and pads against BREACH). Streaming answers are never
compressed: the event stream must reach the client event by event (it is a Channels consumer,
outside Django's middleware, and this rule keeps it so should any stream come through Django).

Brotli is left out: no maintained binding is installed here, and on transcript JSON gzip's ratio
already leaves the request cost, not the bytes, as what limits throughput (docs/decisions/transcripts.md
"Transcripts: fast path, exports, conditional requests, compression")."""

from __future__ import annotations

from django.middleware.gzip import GZipMiddleware

MIN_LENGTH = 1024


class CompressionMiddleware(GZipMiddleware):
    def process_response(self, request, response):
        if response.streaming or len(response.content) < MIN_LENGTH:
            return response
        return super().process_response(request, response)
