"""A `redis-server` of a test's (or the fault rig's) own on a free port, to kill and start again.

No persistence (`--save ''`, no AOF): a restart is an empty Redis, as after the crash of a
cache-only deployment, so a test sees what a real outage loses."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.servers import free_port

REDIS_SERVER = shutil.which("redis-server")
# Generous for a loaded machine; a healthy redis-server answers within milliseconds.
START_SECONDS = 30


class RedisServer:
    """`redis-server --port <free>` as a subprocess, bound to `bind` (inside network namespace
    `netns` when given): `kill()` it (SIGKILL) and `start()` it again on the same port."""

    def __init__(self, log_dir: Path, *, bind: str = "127.0.0.1", port: int | None = None,
                 netns: str | None = None) -> None:
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not installed")
        self.bind, self.port, self.netns = bind, port or free_port(), netns
        self.log = log_dir / f"redis-{self.port}.log"
        self.process: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://{self.bind}:{self.port}/0"

    def start(self) -> None:
        command = [REDIS_SERVER, "--bind", self.bind, "--port", str(self.port), "--save", "", "--appendonly", "no",
                   "--protected-mode", "no", "--logfile", str(self.log)]
        if self.netns:
            command = ["ip", "netns", "exec", self.netns, *command]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_SECONDS
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on {self.bind}:{self.port}; see {self.log}")
            time.sleep(0.05)

    def answers(self) -> bool:
        try:
            with socket.create_connection((self.bind, self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no goodbye to any client, as when the machine or the container dies."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
