"""A daphne server process (`python -m engine.daphne_worker …`, what `serve` starts): daphne's
own command line, listening on the socket `serve` gave it once its application is built
(`listen_once_built`), with the start-up heap settled before it serves and `serve` told once it
does.

Every library is imported the ordinary way (docs/decisions/import-deferral.md says why nothing
is held back in `sys.modules` any more). One switch is the library's own: autobahn, which
daphne imports for WebSocket (not served here), compiles the C declarations of its native UTF-8
validator with pycparser at import unless `AUTOBAHN_USE_NVX=0` selects its Python one.

Relies on (pinned in tests/test_engine_pins.py): daphne's command line building the application
in `load_asgi_app` before it adopts the `--fd` socket, which Twisted adopts without listening;
autobahn reading `AUTOBAHN_USE_NVX` at import;
CPython's `gc.freeze` and `gc.set_threshold`, and glibc's `malloc_trim` (called through ctypes
where it exists).
"""

from __future__ import annotations

import ctypes
import gc
import os
import socket

HEARTBEAT_SECONDS = 1.0  # how often a server tells `serve` it lives
# The collector's first threshold in a server process (CPython's default: 700). See
# `settle_start_up_heap`.
YOUNG_COLLECTION_THRESHOLD = 7000


def settle_start_up_heap() -> None:
    """Once the application is built, before it serves:
    - freezes what start-up made (settings, URL resolvers, DRF: alive as long as the process)
      out of the collector's reach, so a full collection walks only what came after, mostly the
      open streams, and a burst of stream opens does not stall the event loop walking start-up's
      objects again and again;
    - collects the youngest generation every YOUNG_COLLECTION_THRESHOLD allocations instead of
      CPython's 700: a request's many short-lived objects mostly die before a collection sees
      them, instead of being promoted, so the full collections that promotions trigger (each
      walks every open stream's objects with the GIL held, on whichever thread allocated, and
      stops the whole process meanwhile) come far less often (docs/decisions/mechanisms.md);
    - hands the heap that start-up allocated and freed back to the kernel (glibc's
      `malloc_trim`; nothing where the C library has no such call)."""
    gc.freeze()
    _, *older = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *older)
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):
        pass


def start_heartbeat() -> None:
    """Tells `serve` this process serves and lives (engine/serve.py): a byte on the pipe named by
    SERVE_READY_FD once the reactor runs (it watches the socket daphne was given before
    `reactor.run()`), then one every HEARTBEAT_SECONDS, written by the reactor thread itself, so
    a silence means the event loop stopped turning, not that a view is busy on a thread. Never
    blocks: a beat the full pipe cannot take is dropped; once `serve` is gone, beats stop."""
    fd = os.environ.pop("SERVE_READY_FD", None)
    if fd is None:
        return
    from twisted.internet import task

    fd = int(fd)
    os.set_blocking(fd, False)
    os.set_inheritable(fd, False)

    def beat() -> None:
        try:
            os.write(fd, b".")
        except BlockingIOError:
            pass
        except OSError:  # the reading end is closed: no `serve` listens any more
            beating.stop()
            os.close(fd)

    beating = task.LoopingCall(beat)
    beating.start(HEARTBEAT_SECONDS, now=True)


def listen_once_built(command_line: type) -> type:
    """daphne's command line (`command_line`), made to call listen() on its inherited socket
    (`--fd`) once the application is built, just before daphne adopts it: `serve` may hand a
    replacement a socket that is only bound, out of the kernel's group, so that no connection
    waits on it through Django's set-up. Twisted adopts the socket as it is (it never listens
    on an adopted one); listen() on a socket already listening only sets its backlog again."""
    from engine.serve import ACCEPT_QUEUE

    class ListeningOnceBuilt(command_line):
        def run(self, args):
            self.inherited_fd = self.parser.parse_args(args).file_descriptor
            return super().run(args)

        def load_asgi_app(self, asgi_app_path: str):
            application = super().load_asgi_app(asgi_app_path)
            if self.inherited_fd is not None:
                with socket.socket(fileno=os.dup(self.inherited_fd)) as inherited:
                    inherited.listen(ACCEPT_QUEUE)
            return application

    return ListeningOnceBuilt


def main() -> None:
    os.environ.setdefault("AUTOBAHN_USE_NVX", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    from daphne.cli import CommandLineInterface
    from twisted.internet import reactor  # daphne's command line installed its asyncio reactor

    reactor.callWhenRunning(settle_start_up_heap)
    reactor.callWhenRunning(start_heartbeat)
    listen_once_built(CommandLineInterface).entrypoint()


if __name__ == "__main__":
    main()
