"""A daphne server process (`python -m engine.daphne_worker …`, what `serve` starts): daphne's
own command line, with the start-up heap settled before it serves and `serve` told once it does.

Every library is imported the ordinary way (docs/decisions/import-deferral.md says why nothing
is held back in `sys.modules` any more). One switch is the library's own: autobahn, which
daphne imports for WebSocket (not served here), compiles the C declarations of its native UTF-8
validator with pycparser at import unless `AUTOBAHN_USE_NVX=0` selects its Python one.

Relies on (pinned in tests/test_engine_pins.py): autobahn reading `AUTOBAHN_USE_NVX` at import;
CPython's `gc.freeze` and glibc's `malloc_trim` (called through ctypes where it exists).
"""

from __future__ import annotations

import ctypes
import gc
import os


def settle_start_up_heap() -> None:
    """Once the application is built, before it serves:
    - freezes what start-up made (settings, URL resolvers, DRF: alive as long as the process)
      out of the collector's reach, so a full collection walks only what came after, mostly the
      open streams, and a burst of stream opens does not stall the event loop walking start-up's
      objects again and again;
    - hands the heap that start-up allocated and freed back to the kernel (glibc's
      `malloc_trim`; nothing where the C library has no such call)."""
    gc.freeze()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):
        pass


def report_ready() -> None:
    """Tells `serve` this process serves (its reactor runs and watches the socket daphne was
    given before `reactor.run()`): one byte on the pipe named by SERVE_READY_FD, if any;
    `serve` starts the task side once every server has said so (engine/serve.py)."""
    fd = os.environ.pop("SERVE_READY_FD", None)
    if fd is not None:
        try:
            os.write(int(fd), b".")
        finally:
            os.close(int(fd))


def main() -> None:
    os.environ.setdefault("AUTOBAHN_USE_NVX", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    from daphne.cli import CommandLineInterface
    from twisted.internet import reactor  # daphne's command line installed its asyncio reactor

    reactor.callWhenRunning(settle_start_up_heap)
    reactor.callWhenRunning(report_ready)
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
