"""Bench only: what holds a daphne server process's event loop, seen from inside the process.

Installed by bench/settings.py in each `serve` server process when `BENCH_LOOP_PROBE=DIR` is
set, once the reactor runs; every `DUMP_SECONDS` it appends what is new to `DIR/<pid>.jsonl`:

- `lag`: how late a timer due every `TICK_SECONDS` ran (ms), one sample per tick: the loop's
  stalls as a request or a frame waiting for the loop sees them;
- `long`: every loop callback that held the loop `LONG_SECONDS` or more: when, wall and loop
  thread CPU ms (wall far above CPU: the loop thread waited for the GIL or for a core), and
  what it was (the callback's qualified name);
- `gc`: every collection of generation 2 (when, ms, the thread it ran on, collected), and the
  count and total ms of each generation's collections;
- `requests`: per append, wall in the server, wall and thread CPU on its lane;
- `threads`: CPU seconds of each thread of the process by role (the loop, the lanes, the
  hub's database threads, the rest), from /proc/self/task.

It wraps `asyncio.Handle._run` (every loop callback, Twisted's reads and timers included), adds
a `gc.callbacks` entry and a timer: about a microsecond a callback, for diagnosis runs only.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import json
import os
import threading
import time
from asyncio import events
from pathlib import Path

_current: contextvars.ContextVar = contextvars.ContextVar("bench_probe_request")

TICK_SECONDS = 0.005
LONG_SECONDS = 0.010
DUMP_SECONDS = 3.0


def _what(callback, args: tuple = ()) -> str:
    """A loop callback, named: a task by its coroutine, a Twisted read or write by what was read
    (an HTTP connection, the listening port), anything else by its qualified name."""
    target = getattr(callback, "func", callback)  # functools.partial
    owner = getattr(target, "__self__", None)
    if isinstance(owner, asyncio.Future) and hasattr(owner, "get_coro"):
        coro = owner.get_coro()
        return "task " + getattr(coro, "__qualname__", type(coro).__name__)
    name = getattr(target, "__qualname__", None) or type(target).__name__
    if name == "callWithLogger" and len(args) >= 3:  # Twisted's reactor: (selectable, _readOrWrite, selectable, read)
        selectable = args[0]
        protocol = getattr(selectable, "protocol", None)
        kind = "read" if args[-1] else "write"
        return f"twisted {kind} {type(selectable).__name__}" + (f" ({type(protocol).__name__})" if protocol else "")
    if owner is not None and "." not in name:
        name = f"{type(owner).__qualname__}.{name}"
    return f"{getattr(target, '__module__', '') or ''}.{name}"


class Probe:
    def __init__(self, loop: asyncio.AbstractEventLoop, out_dir: Path) -> None:
        self.loop = loop
        self.out = out_dir / f"{os.getpid()}.jsonl"
        self._written: dict[str, int] = {}
        self.loop_thread = threading.get_ident()
        self.lag: list[tuple[float, float]] = []
        self.long: list[tuple[float, float, float, str]] = []
        self.gc_full: list[tuple[float, float, str, int]] = []
        self.gc_totals = [[0, 0.0], [0, 0.0], [0, 0.0]]
        self._gc_started = 0.0
        self._frozen = gc.get_freeze_count()
        self._next = 0.0

    def start(self) -> None:
        original = events.Handle._run
        probe = self

        def _run(handle) -> None:
            if threading.get_ident() != probe.loop_thread:
                return original(handle)
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(handle)
            finally:
                took = time.perf_counter() - wall
                if took >= LONG_SECONDS:
                    probe.long.append((time.time() - took, took * 1000, (time.thread_time() - cpu) * 1000,
                                       _what(handle._callback, handle._args or ())))

        events.Handle._run = _run
        self._time_requests()
        gc.callbacks.append(self._gc)
        self._next = self.loop.time() + TICK_SECONDS
        self.loop.call_at(self._next, self._tick)
        threading.Thread(target=self._dumping, name="bench-loop-probe", daemon=True).start()

    def _time_requests(self) -> None:
        """Per request (path with `/segments`, an append): wall from the ASGI call to its end (the
        lane queue, the body, the answer sent), and wall and thread CPU of its part on the lane."""
        from engine import lanes

        handler = lanes.LaneASGIHandler
        call, respond = handler.__call__, handler.respond
        probe = self
        self.requests: list[tuple[float, float, float, float]] = []
        self._lane = threading.local()

        async def __call__(self, scope, receive, send):
            if not scope.get("path", "").endswith("/segments"):
                return await call(self, scope, receive, send)
            started = time.perf_counter()
            box = [0.0, 0.0]
            token = _current.set(box)
            try:
                return await call(self, scope, receive, send)
            finally:
                _current.reset(token)
                probe.requests.append((time.time(), (time.perf_counter() - started) * 1000, box[0], box[1]))

        def timed_respond(self, scope, body_file):
            box = _current.get(None)
            if box is None:
                return respond(self, scope, body_file)
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return respond(self, scope, body_file)
            finally:
                box[0] = (time.perf_counter() - wall) * 1000
                box[1] = (time.thread_time() - cpu) * 1000

        handler.__call__ = __call__
        handler.respond = timed_respond

    def _tick(self) -> None:
        now = self.loop.time()
        self.lag.append((time.time(), (now - self._next) * 1000))
        self._next = now + TICK_SECONDS
        self.loop.call_at(self._next, self._tick)

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        took = (time.perf_counter() - self._gc_started) * 1000
        generation = info["generation"]
        self.gc_totals[generation][0] += 1
        self.gc_totals[generation][1] += took
        if generation == 2:
            thread = "loop" if threading.get_ident() == self.loop_thread else threading.current_thread().name
            self.gc_full.append((time.time(), took, thread, info.get("collected", 0)))

    def _threads(self) -> dict[str, float]:
        names = {t.native_id: t.name for t in threading.enumerate()}
        loop_native = next((t.native_id for t in threading.enumerate() if t.ident == self.loop_thread), None)
        ticks = os.sysconf("SC_CLK_TCK")
        roles: dict[str, float] = {}
        for task in Path("/proc/self/task").iterdir():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            tid = int(task.name)
            name = names.get(tid, "")
            role = ("loop" if tid == loop_native else "lanes" if name.startswith("django-lane")
                    else "hub db" if name.startswith("events-db") else "other")
            roles[role] = roles.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
        return roles

    def _dumping(self) -> None:
        while True:
            time.sleep(DUMP_SECONDS)
            self._dump()

    def _dump(self) -> None:
        """Appends what is new since the last dump, from a thread of its own (the GIL is handed
        over to the loop every switch interval, never held through a whole dump)."""
        if True:
            new = {"pid": os.getpid(), "at": time.time(), "threads": self._threads(), "gc_totals": self.gc_totals,
                   "gc_threshold": gc.get_threshold(), "frozen": self._frozen}
            for name in ("lag", "long", "gc_full", "requests"):
                items = getattr(self, name)
                new[name] = items[self._written.get(name, 0):]
                self._written[name] = len(items)
            with self.out.open("a") as out:
                out.write(json.dumps(new) + "\n")


def install(out_dir: str) -> None:
    """From the settings module of a daphne server process: start once the reactor runs."""
    from twisted.internet import reactor

    def begin() -> None:
        loop = getattr(reactor, "_asyncioEventloop", None) or asyncio.get_event_loop()
        Probe(loop, Path(out_dir)).start()

    reactor.callWhenRunning(begin)


def summary(out_dir: Path, start: float, end: float) -> dict:
    """Per process, over [start, end] (wall time): lag percentiles, long callbacks by what they
    ran, full collections, thread CPU (whole life of the process)."""
    result = {}
    for path in sorted(out_dir.glob("*.jsonl")):
        data: dict = {"lag": [], "long": [], "gc_full": [], "requests": []}
        for line in path.read_text().splitlines():
            dump = json.loads(line)
            for name in ("lag", "long", "gc_full", "requests"):
                data[name] += dump.pop(name)
            data.update(dump)
        lag = sorted(v for t, v in data["lag"] if start <= t <= end)
        pick = (lambda p: lag[min(len(lag) - 1, int(p / 100 * len(lag)))] if lag else float("nan"))
        long = [x for x in data["long"] if start <= x[0] <= end]
        by_what: dict[str, list[float]] = {}
        for _, wall, cpu, what in long:
            entry = by_what.setdefault(what, [0, 0.0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += wall
            entry[2] += cpu
            entry[3] = max(entry[3], wall)
        full = [x for x in data["gc_full"] if start <= x[0] <= end]
        requests = [r for r in data.get("requests", []) if start <= r[0] <= end]

        def pcts(values: list[float]) -> list[float]:
            ordered = sorted(values)
            return [ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")
                    for p in (50, 99)]
        result[str(data["pid"])] = {
            "lag_ms": {"p50": pick(50), "p99": pick(99), "p999": pick(99.9), "max": lag[-1] if lag else None,
                       "over_20": sum(1 for v in lag if v > 20), "over_50": sum(1 for v in lag if v > 50),
                       "samples": len(lag)},
            "long_callbacks": sorted(([w, *v] for w, v in by_what.items()), key=lambda r: -r[2])[:15],
            "gc_full": {"count": len(full), "total_ms": sum(x[1] for x in full),
                        "max_ms": max((x[1] for x in full), default=0.0),
                        "on_loop": sum(1 for x in full if x[2] == "loop")},
            "appends": {"count": len(requests), "in_server_ms": pcts([r[1] for r in requests]),
                        "on_lane_ms": pcts([r[2] for r in requests]), "lane_cpu_ms": pcts([r[3] for r in requests]),
                        "off_lane_ms": pcts([r[1] - r[2] for r in requests])},
            "gc_totals_life": data["gc_totals"], "threads_cpu_s_life": data["threads"],
            "gc_threshold": data["gc_threshold"], "frozen": data["frozen"],
        }
    return result
