"""A daphne server process (`python -m connect.engine.daphne_worker …`, what `serve` starts): daphne's
own command line, after leaving unimported what such a process never uses, listening on the
socket `serve` gave it once its application is built (`listen_once_built`).

Every server process paid 11 MB for modules that libraries import for features Connect does not
use (measured on one idle process: 114.2 → 102.9 MB, bench/README.md "What a server process
imports"), against issue 26's 300 MB for two processes holding 5,000 streams:
- `requests` (with idna and charset-normalizer) and urllib3, 4.6 MB: Django REST framework's
  `compat` imports `requests` in case its test client is used, django-oauth-toolkit for token
  introspection against another server, which Connect does not configure, and urllib3 for
  fetching a client's metadata document (CIMD), which happens only when such a client arrives;
- PyYAML: DRF's `compat` again, and drf-spectacular's YAML renderer (the schema is served as JSON);
- `click` and `cbor2`: autobahn's utilities and WAMP messages, imported because daphne imports
  autobahn for WebSocket, which Connect does not serve;
- drf-spectacular's `plumbing` imports `rest_framework.test` for one mock request it builds while
  generating a schema, and with it `django.test`, Jinja2 and `unittest` (3.5 MB);
- autobahn's native UTF-8 validator, which compiles its C declarations with pycparser at import
  (`AUTOBAHN_USE_NVX=0` is autobahn's documented switch to its Python one; no WebSocket here).

`requests`, urllib3, PyYAML, `click` and `cbor2` are put in `sys.modules` as deferred modules: an
`import` of one finds it and costs nothing, and its first attribute read (or the import of one
of its submodules) loads it, once, under a lock. `plumbing` is imported with a stand-in for
`rest_framework.test` whose `APIRequestFactory` imports the real one when called; the stand-in
is then removed, so any later `import rest_framework.test` gets the real module.

Relies on (pinned in tests/test_engine_pins.py): daphne's command line building the application
in `load_asgi_app` before it adopts the `--fd` socket, which Twisted adopts without listening;
drf-spectacular's `plumbing` binding `APIRequestFactory` from `rest_framework.test` at import
and only calling it; the deferred libraries not reading their own attributes at import
(tests/test_server_imports.py starts a real server, uses every way in, and checks their shared
objects are not mapped).
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import os
import socket
import sys
import threading
import types

HEARTBEAT_SECONDS = 1.0
DEFERRED = ("requests", "urllib3", "yaml", "click", "cbor2")

_loading = threading.RLock()
_running: set[str] = set()  # deferred modules whose code is running (in the thread holding _loading)


class DeferredModule(types.ModuleType):
    """A module whose code runs on its first attribute read. Its `__path__` is held back until
    then, so importing one of its submodules loads it first."""

    def __getattr__(self, attr: str):
        spec = self.__spec__
        with _loading:
            if type(self) is DeferredModule and spec.name not in _running:
                _running.add(spec.name)
                try:
                    if spec.submodule_search_locations is not None:
                        self.__path__ = spec.submodule_search_locations
                    spec.loader.exec_module(self)
                    self.__class__ = types.ModuleType
                finally:
                    _running.discard(spec.name)
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {spec.name!r} has no attribute {attr!r}") from None


def defer(name: str) -> None:
    """Leave `name` unloaded until used (nothing if it is already imported or not installed)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__dict__.pop("__path__", None)
    module.__class__ = DeferredModule
    sys.modules[name] = module


def _api_request_factory(*args, **kwargs):
    from rest_framework.test import APIRequestFactory

    return APIRequestFactory(*args, **kwargs)


def import_spectacular_plumbing() -> None:
    """drf-spectacular's `plumbing`, its test client import replaced by one made on first call."""
    if "drf_spectacular.plumbing" in sys.modules or "rest_framework.test" in sys.modules:
        return
    stand_in = types.ModuleType("rest_framework.test")
    stand_in.APIRequestFactory = _api_request_factory
    sys.modules["rest_framework.test"] = stand_in
    try:
        import drf_spectacular.plumbing  # noqa: F401
    finally:
        del sys.modules["rest_framework.test"]


def leave_unused_unimported() -> None:
    os.environ.setdefault("AUTOBAHN_USE_NVX", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")
    for name in DEFERRED:
        defer(name)
    import_spectacular_plumbing()


def settle_start_up_heap() -> None:
    """Once the application is built, before it serves:
    - freezes what start-up made (settings, URL resolvers, DRF, ~145,000 objects, alive as long
      as the process) out of the collector's reach, so a full collection walks only what came
      after, mostly the open streams: a pass took 133-144 ms of the event loop, and a burst of
      stream opens triggers several (bench/README.md, issue 26);
    - hands the heap that start-up allocated and freed back to the kernel (glibc's
      `malloc_trim`: 1.3-1.6 MB of an idle process; nothing where the C library has no such call)."""
    gc.freeze()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):
        pass


def start_heartbeat() -> None:
    """Tells `serve` this process serves and lives (connect/engine/serve.py): a byte on the pipe
    named by SERVE_READY_FD once the reactor runs (it watches the socket daphne was given before
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
    from connect.engine.serve import ACCEPT_QUEUE

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
    leave_unused_unimported()
    from daphne.cli import CommandLineInterface
    from twisted.internet import reactor  # daphne's command line installed its asyncio reactor

    reactor.callWhenRunning(settle_start_up_heap)
    reactor.callWhenRunning(start_heartbeat)
    listen_once_built(CommandLineInterface).entrypoint()


if __name__ == "__main__":
    main()
