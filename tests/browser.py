"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`):
JSON messages separated by NUL bytes on file descriptors 3 (to the browser) and 4 (from it).
No websocket library and no driver binary: the browser Debian packages is enough.

Only what the page tests need: open a page, wait for a condition, evaluate JavaScript, take
a screenshot. Every wait is bounded.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


class Chromium:
    def __init__(self, profile_dir: Path) -> None:
        if CHROMIUM is None:
            raise BrowserError("no chromium on PATH")
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def wire_pipes() -> None:  # in the child: the protocol's fixed descriptors 3 and 4
            read_end, write_end = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--window-size=1280,900",
                f"--user-data-dir={profile_dir}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            preexec_fn=wire_pipes,  # noqa: PLW1509 - no threads started by this process here
            pass_fds=(3, 4),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    # --- protocol ---------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError("timed out waiting for the browser")
            ready, _, _ = select.select([self._from_browser], [], [], remaining)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise BrowserError("the browser closed its pipe")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, *, session: bool = False, timeout: float = 20, **params: Any) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def _wait_event(self, name: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == name:
                    return self._events.pop(i)
            event = self._read_message(deadline)
            if "method" in event:
                self._events.append(event)

    # --- what tests use ---------------------------------------------------------------------

    def open(self, url: str, timeout: float = 20) -> None:
        """Navigate and wait for the load event of the page (after any redirects)."""
        self._events = [e for e in self._events if e["method"] != "Page.loadEventFired"]
        self.call("Page.navigate", session=True, url=url)
        self._wait_event("Page.loadEventFired", timeout)

    def submit(self, script: str, timeout: float = 20) -> None:
        """Run a script that submits a form or clicks a link, and wait for the next page."""
        self._events = [e for e in self._events if e["method"] != "Page.loadEventFired"]
        self.evaluate(script)
        self._wait_event("Page.loadEventFired", timeout)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20) -> Any:
        """Poll until the expression is truthy (pages that render with JavaScript)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"never true: {expression}")
            time.sleep(0.1)

    def computed(self, selector: str, prop: str) -> str:
        return self.evaluate(
            f"getComputedStyle(document.querySelector({json.dumps(selector)})).getPropertyValue({json.dumps(prop)})"
        )

    def viewport(self, width: int, height: int) -> None:
        """Size the page's viewport as a desktop window of that size would (no mobile emulation)."""
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        """The viewport as a person sees it, or with `full_page` the whole page's height."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = self.evaluate("document.documentElement.scrollHeight")
            width = self.evaluate("window.innerWidth")
            params |= {"captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}}
        data = self.call("Page.captureScreenshot", session=True, **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass


# Fixtures of the page tests (imported by them): a live server with DEBUG off serving the
# static files collected as production does, and a fresh browser profile per test.


@pytest.fixture(scope="module")
def page_server(django_db_setup, django_db_blocker, tmp_path_factory, collected_static):
    from tests.servers import serve

    with serve(tmp_path_factory.mktemp("pages"), env={"STATIC_ROOT": str(collected_static)}) as server:
        yield server


@pytest.fixture
def browser(tmp_path):
    chromium = Chromium(tmp_path / "profile")
    yield chromium
    chromium.close()
