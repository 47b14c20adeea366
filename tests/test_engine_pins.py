"""Every private attribute, method or module path of a library that Connect touches, checked at
the installed versions, so that an upgrade fails here, loudly and first, rather than somewhere
at run time. Each entry says who relies on it; the guarded uses (hasattr/getattr with a safe
fallback) are pinned too, since their fallback is slower or does less.

Found by grepping the repository for `._name` accesses on library objects, `from lib import
_name`, overridden private methods and getattr/hasattr with private names. Connect's own
private names (leading underscore in apps/, engine/ and connect/) are not listed: they change together
with their callers."""

from __future__ import annotations

import importlib
import inspect
import multiprocessing.synchronize
from collections.abc import Callable

import pytest


def _attr(path: str) -> object:
    """`package.module:Class.attr` → the object (AttributeError/ImportError when gone)."""
    module_name, _, attributes = path.partition(":")
    target: object = importlib.import_module(module_name)
    for name in attributes.split(".") if attributes else []:
        target = getattr(target, name)
    return target


def _parameters(path: str) -> list[str]:
    return list(inspect.signature(_attr(path)).parameters)


def _source_has(path: str, text: str) -> bool:
    return text in inspect.getsource(_attr(path))


def _django_request_body_is_read_from__body() -> bool:
    from django.http import HttpRequest

    request = HttpRequest()
    request._body = b"replaced"
    return request.body == b"replaced"


def _django_model_state_has_adding_and_db() -> bool:
    from django.contrib.auth.models import Group

    state = Group()._state
    return state.adding is True and hasattr(state, "db")


def _multiprocessing_queue_has_reader_lock() -> bool:
    from django_q.queues import Queue

    queue = Queue()
    try:
        lock = queue._rlock
        return lock.acquire(False) and (lock.release() is None)
    finally:
        queue.close()
        queue.join_thread()


# (who relies on it, what, check) — check returns True or raises when the name is gone.
PINS: list[tuple[str, str, Callable[[], object]]] = [
    # --- Django ---------------------------------------------------------------------------------
    ("engine/forking.py", "DatabaseWrapper._connection_pools (class-level dict of pools)",
     lambda: isinstance(_attr("django.db.backends.postgresql.base:DatabaseWrapper._connection_pools"), dict)),
    ("engine/postgresql/base.py", "DatabaseWrapper.get_new_connection(conn_params) takes pool.getconn()",
     lambda: _parameters("django.db.backends.postgresql.base:DatabaseWrapper.get_new_connection") == ["self", "conn_params"]
     and _source_has("django.db.backends.postgresql.base:DatabaseWrapper.get_new_connection", "self.pool.getconn()")),
    ("apps/oauth/views.py", "HttpRequest._body is what HttpRequest.body returns once set",
     _django_request_body_is_read_from__body),
    ("apps/tenancy/admin.py (adding), apps/events/services.py (adding and db, on outbox rows inserted in bulk)",
     "Model._state.adding and ._state.db",
     _django_model_state_has_adding_and_db),
    ("engine/lanes.py", "ASGIHandler.handle(scope, receive, send)",
     lambda: _parameters("django.core.handlers.asgi:ASGIHandler.handle") == ["self", "scope", "receive", "send"]),
    ("engine/lanes.py", "ASGIHandler.get_response_async(request)",
     lambda: _parameters("django.core.handlers.asgi:ASGIHandler.get_response_async") == ["self", "request"]),
    ("engine/lanes.py", "BaseHandler.load_middleware(is_async) (LaneASGIHandler loads it in sync mode)",
     lambda: _parameters("django.core.handlers.asgi:ASGIHandler.load_middleware") == ["self", "is_async"]),
    ("engine/lanes.py", "LaneASGIHandler.respond does what ASGIHandler.run_get_response does, which calls "
     "get_response_async(request)",
     lambda: _source_has("django.core.handlers.asgi:ASGIHandler.run_get_response", "self.get_response_async(request)")),
    ("engine/lanes.py", "HttpResponse._handler_class, set on the response as ASGIHandler.run_get_response sets it",
     lambda: _source_has("django.core.handlers.asgi:ASGIHandler.run_get_response",
                         "response._handler_class = self.__class__")),
    # --- asgiref --------------------------------------------------------------------------------
    ("engine/lanes.py", "ThreadSensitiveContext(executor=…)",
     lambda: "executor" in _parameters("asgiref.sync:ThreadSensitiveContext.__init__")),
    # --- Django REST framework -----------------------------------------------------------------
    ("apps/access/rest.py", "rest_framework Request._request (the Django HttpRequest, on which admission leaves "
     "the rate for the rate-limit headers)",
     lambda: _source_has("rest_framework.request:Request.__init__", "self._request = request")),
    # --- django-oauth-toolkit -------------------------------------------------------------------
    ("engine/authorization_response.py", "oauth2_provider.oauth2_backends._add_iss_to_redirect(uri, issuer)",
     lambda: _parameters("oauth2_provider.oauth2_backends:_add_iss_to_redirect") == ["uri", "issuer"]),
    ("apps/oauth/validators.py", "OAuth2Validator._create_access_token(expires, request, token, source_refresh_token)",
     lambda: _parameters("oauth2_provider.oauth2_validators:OAuth2Validator._create_access_token")
     == ["self", "expires", "request", "token", "source_refresh_token"]),
    ("apps/oauth/validators.py", "OAuth2Validator._create_refresh_token(request, refresh_token_code, access_token, previous_refresh_token)",
     lambda: _parameters("oauth2_provider.oauth2_validators:OAuth2Validator._create_refresh_token")
     == ["self", "request", "refresh_token_code", "access_token", "previous_refresh_token"]),
    ("apps/oauth/validators.py", "OAuth2Validator._create_authorization_code(request, code, expires)",
     lambda: _parameters("oauth2_provider.oauth2_validators:OAuth2Validator._create_authorization_code")
     == ["self", "request", "code", "expires"]),
    # --- django-q2 ------------------------------------------------------------------------------
    ("engine/taskcluster.py", "django_q.cluster.Sentinel.start()",
     lambda: _parameters("django_q.cluster:Sentinel.start") == ["self"]),
    ("engine/taskcluster.py", "django_q.cluster.Sentinel.reincarnate(process)",
     lambda: _parameters("django_q.cluster:Sentinel.reincarnate") == ["self", "process"]),
    ("engine/taskcluster.py", "Sentinel's pool, task_queue and stop_event attributes",
     lambda: all(_source_has("django_q.cluster:Sentinel.__init__", f"self.{name} =")
                 for name in ("pool", "task_queue", "stop_event"))),
    ("engine/taskcluster.py", "Sentinel.reincarnate is given a worker of self.pool (the watch counts deaths so)",
     lambda: _source_has("django_q.cluster:Sentinel.reincarnate", "self.pool")),
    ("engine/taskcluster.py", "django_q.queues.Queue keeps multiprocessing's reader lock _rlock",
     _multiprocessing_queue_has_reader_lock),
    ("engine/taskcluster.py", "the stdlib queue's get() takes _rlock",
     lambda: _source_has("multiprocessing.queues:Queue.get", "self._rlock")),
    # --- drf-spectacular ------------------------------------------------------------------------
    ("connect/settings.py, connect/openapi.py", "the schema views make SPECTACULAR_SETTINGS' DEFAULT_GENERATOR_CLASS "
     "(connect.openapi.SchemaGenerator)",
     lambda: _source_has("drf_spectacular.views:SpectacularAPIView", "spectacular_settings.DEFAULT_GENERATOR_CLASS")),
    # --- autobahn -------------------------------------------------------------------------------
    ("engine/daphne_worker.py", "AUTOBAHN_USE_NVX=0 turns autobahn's native (cffi) validator off",
     lambda: _source_has("autobahn.websocket", "AUTOBAHN_USE_NVX") and _source_has("autobahn.websocket.utf8validator", "USES_NVX")),
    # --- daphne ---------------------------------------------------------------------------------
    ("engine/daphne_stream.py", "daphne hands applications send=partial(server.handle_reply, protocol)",
     lambda: _source_has("daphne.server:Server.create_application", "send=partial(self.handle_reply, protocol)")),
    ("engine/serve.py", "daphne --fd becomes the endpoint fd:fileno=N",
     lambda: _source_has("daphne.endpoints:build_endpoint_description_strings", '"fd:fileno=%d"')),
    ("engine/daphne_worker.py", "daphne's command line parses --fd into file_descriptor and builds the application "
     "with load_asgi_app before its Server",
     lambda: _source_has("daphne.cli:CommandLineInterface.__init__", 'dest="file_descriptor"')
     and _source_has("daphne.cli:CommandLineInterface.run", "self.load_asgi_app(args.application)")),
    ("engine/daphne_worker.py", "Twisted adopts a socket as it is, without calling listen() on it",
     lambda: _source_has("twisted.internet.tcp:Port.startListening", "skt = self._preexistingSocket")),
    # --- Twisted --------------------------------------------------------------------------------
    ("engine/daphne_stream.py", "twisted.web.http.Request._disconnected",
     lambda: _attr("twisted.web.http:Request._disconnected") is False),
    ("engine/daphne_stream.py", "FileDescriptor._writeDisconnected, dataBuffer, offset",
     lambda: (_attr("twisted.internet.abstract:FileDescriptor._writeDisconnected") is False
              and _attr("twisted.internet.abstract:FileDescriptor.dataBuffer") == b""
              and _attr("twisted.internet.abstract:FileDescriptor.offset") == 0)),
    ("engine/daphne_stream.py", "FileDescriptor._tempDataLen (set per instance)",
     lambda: _source_has("twisted.internet.abstract:FileDescriptor.__init__", "self._tempDataLen = 0")),
    ("engine/daphne_stream.py", "tcp.Connection.writeSomeData is its socket's send() (write_through calls it)",
     lambda: _source_has("twisted.internet.tcp:Connection.writeSomeData", "untilConcludes(self.socket.send")),
    # --- channels -------------------------------------------------------------------------------
    ("engine/consumers.py", "AsyncConsumer.__call__ joins the channel layer and sets scope and base_send",
     lambda: all(_source_has("channels.consumer:AsyncConsumer.__call__", text)
                 for text in ("get_channel_layer(", "self.scope = scope", "self.base_send ="))),
    ("engine/consumers.py", "AsyncConsumer.send writes through self.base_send",
     lambda: _source_has("channels.consumer:AsyncConsumer.send", "self.base_send(message)")),
    ("engine/consumers.py", "AsyncConsumer.dispatch closes old database connections per message (why "
     "LayerlessHttpConsumer overrides it)",
     lambda: _source_has("channels.consumer:AsyncConsumer.dispatch", "aclose_old_connections()")),
    ("engine/consumers.py", "channels.consumer.get_handler_name(message)",
     lambda: _parameters("channels.consumer:get_handler_name") == ["message"]),
    ("engine/lanes.py", "channels.db.database_sync_to_async closes old connections around the call (Lanes.run "
     "does the same upkeep)",
     lambda: _source_has("channels.db:DatabaseSyncToAsync.thread_handler", "close_old_connections")),
    # --- psycopg_pool ---------------------------------------------------------------------------
    ("engine/postgresql/base.py", "psycopg_pool.ConnectionPool.check_connection(conn)",
     lambda: _parameters("psycopg_pool:ConnectionPool.check_connection") == ["conn"]),
    ("engine/postgresql/base.py", "psycopg_pool.ConnectionPool.check() tests every idle connection",
     lambda: _parameters("psycopg_pool:ConnectionPool.check") == ["self"]),
    ("engine/postgresql/base.py, engine/faults.py", "ConnectionPool.putconn discards a closed connection",
     lambda: _source_has("psycopg_pool:ConnectionPool._return_connection", "discarding closed connection")),
]


LIBRARY_MODULES = ("twisted.internet.abstract", "twisted.internet.tcp", "twisted.web.http", "daphne.http_protocol",
                   "daphne.server", "channels.generic.http", "channels.consumer")


def _resolve_anywhere(name: str) -> bool:
    """A private name as another module declares it: `module:Attr.name`, a dotted path
    (`twisted.internet.abstract.FileDescriptor._tempDataLen`), or a bare attribute name. An
    attribute set per instance is found in its class's source."""
    if ":" in name:
        _attr(name)
        return True
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, part in enumerate(parts[cut:]):
            if hasattr(target, part):
                target = getattr(target, part)
            elif i == len(parts[cut:]) - 1 and inspect.isclass(target):
                return f"self.{part}" in inspect.getsource(target)
            else:
                return False
        return True
    return any(f".{name}" in inspect.getsource(importlib.import_module(module)) for module in LIBRARY_MODULES)


def _declared_pins() -> list[tuple[str, str, Callable[[], object]]]:
    """The private names each engine module declares in its `PRIVATE_NAMES`: `(module, attr)`
    pairs (attr may be dotted, `Class.attr`) or strings in `_resolve_anywhere`'s forms."""
    from pathlib import Path

    engine = Path(__file__).resolve().parent.parent / "engine"
    pins = []
    for path in sorted(engine.rglob("*.py")):
        name = ".".join(path.relative_to(engine.parent).with_suffix("").parts)
        for entry in getattr(importlib.import_module(name), "PRIVATE_NAMES", ()):
            dotted = ".".join(entry) if isinstance(entry, tuple) else str(entry)
            pins.append((str(path.relative_to(engine.parent)), dotted, lambda d=dotted: _resolve_anywhere(d)))
    return pins


@pytest.mark.parametrize(("who", "what", "check"), PINS + _declared_pins(), ids=lambda v: v if isinstance(v, str) else "")
def test_private_name_exists_at_the_installed_version(who, what, check):
    assert check(), f"{what}, relied on by {who}, has changed at the installed version"


def test_every_engine_module_says_what_it_relies_on():
    from pathlib import Path

    engine = Path(__file__).resolve().parent.parent / "engine"
    modules = [path for path in engine.rglob("*.py") if path.name != "__init__.py"]
    assert modules
    for path in modules:
        name = ".".join(path.relative_to(engine.parent).with_suffix("").parts)
        assert "Relies on" in (inspect.getdoc(importlib.import_module(name)) or ""), name


def test_the_task_queue_lock_is_a_process_shared_semaphore():
    # The watch releases the dead holder's lock from the sentinel: only a semaphore allows a
    # release by a process other than the holder.
    from django_q.queues import Queue

    queue = Queue()
    try:
        assert isinstance(queue._rlock, multiprocessing.synchronize.SemLock)
    finally:
        queue.close()
        queue.join_thread()
