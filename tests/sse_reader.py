"""The one SSE client of the live tests: a request on its own thread, read frame by frame.

A reader opens its request through `open(client)`, the request hook (the event stream's GET in
tests/events/live.py `Reader`, a POST to /mcp in tests/mcp/streams.py `StreamReader`). An answer
that is not a 200 event stream is a refusal: its body goes to `refused_with`. Otherwise each
frame (the lines up to a blank one) is recorded whole in `raw_frames`, its comment lines in
`comments`, and its fields, when it has any, as an `SseEvent` in `events` and to `on_event`.
Everything is recorded under one condition, which `wait` waits on; `ended` is set however the
stream ends, and `status` is -1 when no answer came."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field

import httpx

WAIT = 60  # seconds any single wait in the live tests may take before it fails (a long transaction
# anywhere in the PostgreSQL cluster holds the log horizon, and with it live delivery, back)


@dataclass
class SseEvent:
    id: str | None
    event: str | None
    data: str

    @property
    def json(self) -> dict:
        return json.loads(self.data)


@dataclass
class SseReader:
    """The state every reader shares; a subclass says how to open its request (`open`) and
    what else an event means to it (`on_event`). Subclasses are dataclasses whose
    `__post_init__` calls `start()`."""

    status: int | None = field(default=None, kw_only=True)
    headers: dict = field(default_factory=dict, kw_only=True)
    events: list = field(default_factory=list, kw_only=True)
    comments: list = field(default_factory=list, kw_only=True)
    raw_frames: list = field(default_factory=list, kw_only=True)
    ended: bool = field(default=False, kw_only=True)

    read_timeout = 30.0

    # --- Hooks --------------------------------------------------------------------------------

    def open(self, client: httpx.Client) -> contextlib.AbstractContextManager[httpx.Response]:
        """The request, as `client.stream(...)`."""
        raise NotImplementedError

    def refused_with(self, body: bytes) -> None:
        """The body of an answer that is not a 200 event stream."""

    def on_event(self, event: SseEvent) -> None:
        """Called under the condition for each frame with fields, after it is in `events`."""

    def progress(self) -> str:
        """What a timed-out wait reports it had seen."""
        return f"events={[e.event for e in self.events]}"

    # --- The reader ---------------------------------------------------------------------------

    def start(self) -> None:
        """Open the request on a thread of its own; returns once the answer's status is known."""
        self._cond = threading.Condition()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=self.read_timeout))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.wait(lambda r: r.status is not None, what="response status")

    def _run(self) -> None:
        try:
            with self.open(self._client) as response:
                with self._cond:
                    self.status, self.headers = response.status_code, dict(response.headers)
                    self._cond.notify_all()
                if response.status_code != 200 or not response.headers.get("content-type", "").startswith(
                    "text/event-stream"
                ):
                    self.refused_with(response.read())
                    return
                frame: list[str] = []
                for line in response.iter_lines():
                    if line == "":
                        if frame:
                            self._frame(frame)
                        frame = []
                    else:
                        frame.append(line)
        except (httpx.HTTPError, RuntimeError, ValueError):
            pass
        finally:
            with self._cond:
                self.ended = True
                if self.status is None:
                    self.status = -1
                self._cond.notify_all()

    def _frame(self, lines: list[str]) -> None:
        with self._cond:
            self.raw_frames.append(lines)
            fields: dict[str, str] = {}
            for line in lines:
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                else:
                    name, _, value = line.partition(": ")
                    fields[name] = value
            if fields:
                event = SseEvent(fields.get("id"), fields.get("event"), fields.get("data", ""))
                self.events.append(event)
                self.on_event(event)
            self._cond.notify_all()

    def wait(self, predicate, *, what: str, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; {self.progress()}")
                self._cond.wait(remaining)

    def close(self) -> None:
        self._client.close()
        self._thread.join(timeout=10)
