"""`serve` replaces a server process that stops answering its heartbeat: a frozen process would
keep its share of new connections (the kernel hashes them to its socket) until continued. A
process busy under load, its event loop still turning, is never taken for a frozen one, and
time `serve` itself was stopped is not a server's silence."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import alive, cmdline_of, descendants, serve, wait_until

ROOT = Path(__file__).resolve().parents[2]

SUPERVISED = """
import sys
from engine import serve
sockets = serve.listening_sockets("127.0.0.1", 0, 2)
servers = [[sys.executable, "-c", sys.argv[1], sys.argv[3] + "-" + str(i), str(sockets[i].fileno())] for i in range(2)]
serve.supervise(servers, sockets, liveness_seconds=float(sys.argv[2]))
"""
# Each server notes its pid, the identity (inode) of the socket it was given and whether that
# socket was listening when it started.
NOTE = (
    "import os, socket, sys, time; sock = socket.socket(fileno=int(sys.argv[2])); "
    "listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN); "
    "open(sys.argv[1], 'a').write(f'{os.getpid()} {os.fstat(sock.fileno()).st_ino} {listening}\\n')\n"
)
BEAT = "fd = int(os.environ['SERVE_READY_FD'])\n"
# A server that beats five times a second, as the real one does once a second.
BEATING = NOTE + BEAT + "while True: os.write(fd, b'.'); time.sleep(0.2)"
# One that beats for a second, then exits.
BEATS_THEN_EXITS = NOTE + BEAT + "for _ in range(5): os.write(fd, b'.'); time.sleep(0.2)"
# One that never says it serves (still starting, as far as `serve` knows).
SILENT = NOTE + "time.sleep(600)"


def _supervise(tmp_path: Path, server: str, liveness_seconds: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SUPERVISED, server, str(liveness_seconds), str(tmp_path / "ran")],
        cwd=ROOT, start_new_session=True,
    )  # fmt: skip


def _noted(tmp_path: Path, i: int) -> list[tuple[int, int, int]]:
    """(pid, socket inode, listening at start) of each process that ran as server `i`."""
    path = tmp_path / f"ran-{i}"
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines()] if path.exists() else []


def _pids(tmp_path: Path, i: int) -> list[int]:
    return [pid for pid, _, _ in _noted(tmp_path, i)]


def _stop(supervisor: subprocess.Popen) -> None:
    supervisor.terminate()
    supervisor.wait(timeout=30)


def test_a_server_that_stops_beating_is_killed_and_replaced(tmp_path):
    supervisor = _supervise(tmp_path, BEATING, liveness_seconds=1)
    try:
        first = wait_until(lambda: _pids(tmp_path, 0), what="the first server", timeout=60)[0]
        other = wait_until(lambda: _pids(tmp_path, 1), what="the second server", timeout=60)[0]
        os.kill(first, signal.SIGSTOP)
        wait_until(lambda: len(_pids(tmp_path, 0)) == 2, what="the frozen server replaced", timeout=60)
        assert not alive(first)
        assert _pids(tmp_path, 1) == [other] and alive(other)  # the other one was left alone
    finally:
        _stop(supervisor)


def test_a_silent_servers_socket_is_replaced_by_one_not_yet_listening(tmp_path):
    """The frozen server's socket is closed (the kernel stops handing it connections) and its
    replacement gets a fresh one, bound but out of the group until it listens itself; the other
    server keeps its socket."""
    supervisor = _supervise(tmp_path, BEATING, liveness_seconds=1)
    try:
        (first,) = wait_until(lambda: _noted(tmp_path, 0), what="the first server", timeout=60)
        (other,) = wait_until(lambda: _noted(tmp_path, 1), what="the second server", timeout=60)
        assert first[2] == other[2] == 1  # the sockets of the first start listen already
        os.kill(first[0], signal.SIGSTOP)
        replacement = wait_until(lambda: _noted(tmp_path, 0)[1:], what="the frozen server replaced", timeout=60)[0]
        assert replacement[1] != first[1]
        assert replacement[2] == 0
        assert _noted(tmp_path, 1) == [other]
    finally:
        _stop(supervisor)


def test_a_server_that_exits_is_replaced_on_the_same_listening_socket(tmp_path):
    """Connections queued on an exited server's socket wait there for its replacement."""
    supervisor = _supervise(tmp_path, BEATS_THEN_EXITS, liveness_seconds=1)
    try:
        noted = wait_until(lambda: _noted(tmp_path, 0)[2:], what="two replacements", timeout=60)
        first = _noted(tmp_path, 0)[0]
        assert {(inode, listening) for _, inode, listening in [first, *noted]} == {(first[1], 1)}
    finally:
        _stop(supervisor)


def test_a_server_not_yet_serving_is_not_judged(tmp_path):
    """Start-up (importing Django, building the application) is not silence: the clock starts
    at a server's first byte."""
    supervisor = _supervise(tmp_path, SILENT, liveness_seconds=0.5)
    try:
        wait_until(lambda: _pids(tmp_path, 0) and _pids(tmp_path, 1), what="both servers", timeout=60)
        time.sleep(3)
        assert len(_pids(tmp_path, 0)) == len(_pids(tmp_path, 1)) == 1
    finally:
        _stop(supervisor)


def test_time_serve_itself_was_stopped_is_not_a_servers_silence(tmp_path):
    """`serve` and its servers frozen together (a whole-host pause, a test's SIGSTOP) and
    continued, `serve` first: the servers beat again within their liveness and are kept."""
    supervisor = _supervise(tmp_path, BEATING, liveness_seconds=1)
    try:
        servers = [wait_until(lambda i=i: _pids(tmp_path, i), what="a server", timeout=60)[0] for i in range(2)]
        for pid in [supervisor.pid, *servers]:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(3)
        for pid in [supervisor.pid, *servers]:
            os.kill(pid, signal.SIGCONT)
        time.sleep(3)
        assert [_pids(tmp_path, 0), _pids(tmp_path, 1)] == [[servers[0]], [servers[1]]]
        assert all(alive(pid) for pid in servers)
    finally:
        _stop(supervisor)


# --- a live `serve --workers 2` --------------------------------------------------------------


def daphnes(server) -> list[int]:
    return sorted(p for p in descendants(server.process.pid) if b"daphne" in cmdline_of(p) and alive(p))


def both_daphnes(server) -> list[int] | None:
    pids = daphnes(server)
    return pids if len(pids) == 2 else None


def both_serving(server) -> list[int]:
    """Both server processes, once each has answered a request: a process only started has not
    yet beaten its first heartbeat, and start-up is never judged (frozen then, it would never be
    replaced; the queued connections wait for it)."""
    pids = wait_until(lambda: both_daphnes(server), what="both servers", timeout=60)
    answered: set[int] = set()
    for _ in range(400):
        with httpx.Client(base_url=server.url, timeout=60) as client:
            answered.add(client.get("/test/thread").json()["process"])
        if answered >= set(pids):
            return pids
    raise AssertionError(f"only {answered} of {pids} answered")


def pinned_client(server, process: int) -> httpx.Client:
    """A keep-alive connection that landed on `process` (new connections land by hash)."""
    for _ in range(200):
        client = httpx.Client(base_url=server.url, timeout=30, limits=httpx.Limits(max_connections=1))
        if client.get("/test/thread").json()["process"] == process:
            return client
        client.close()
    raise AssertionError(f"no connection landed on {process}")


class Asking(threading.Thread):
    """Sends `path` on one pinned connection, again and again, until stopped; notes every answer."""

    def __init__(self, client: httpx.Client, path: str) -> None:
        super().__init__(daemon=True)
        self.client, self.path = client, path
        self.answers: list[tuple[int, int | None]] = []
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    response = self.client.get(self.path)
                    self.answers.append((response.status_code, response.json().get("process")))
                except Exception as error:  # noqa: BLE001 - every failure is the finding
                    self.failures.append(repr(error))
        finally:
            self.client.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=60)


class NewConnections(threading.Thread):
    """Sends `/test/thread` on a new connection each time, until a process not in `known` (a
    replacement) has answered and at least `count` answers are in; notes each attempt: when it
    was opened and ended, and its status and process (None, None for a failure)."""

    def __init__(self, server, known: set[int], count: int) -> None:
        super().__init__(daemon=True)
        self.server, self.known, self.count = server, known, count
        self.attempts: list[tuple[float, float, int | None, int | None]] = []
        self.failures: list[str] = []

    def answers(self) -> list[tuple[float, float, int | None, int | None]]:
        return [attempt for attempt in self.attempts if attempt[2] is not None]

    def replaced(self) -> bool:
        return any(process not in self.known for *_, process in self.answers())

    def run(self) -> None:
        while len(self.attempts) < 1000:
            if self.replaced() and len(self.answers()) >= self.count:
                return
            opened = time.monotonic()
            try:
                with httpx.Client(base_url=self.server.url, timeout=ANSWER_SECONDS) as client:
                    response = client.get("/test/thread")
                self.attempts.append((opened, time.monotonic(), response.status_code, response.json().get("process")))
            except Exception as error:  # noqa: BLE001 - every failure is the finding
                self.attempts.append((opened, time.monotonic(), None, None))
                self.failures.append(repr(error))


# A new connection not answered within this is a failure (it waited in a queue nobody accepts
# from): a healthy process answers well within it even beside CPU burners.
ANSWER_SECONDS = 10


@pytest.mark.e2e
def test_a_frozen_server_process_is_replaced_and_the_other_loses_nothing(tmp_path, transactional_db):
    """One of two processes frozen: it is killed within a few seconds and replaced, and new
    connections are answered again within 10 s of the freeze: the frozen socket is
    closed at the kill (the connections that waited on it are reset), the others answer
    meanwhile, and the replacement joins only once it serves. Every request on the other
    process's connections succeeds throughout."""
    with serve(tmp_path, workers=2, env={"CONNECT_SERVE_LIVENESS_SECONDS": "3"}) as server:
        frozen, healthy = both_serving(server)
        askers = [Asking(pinned_client(server, healthy), "/test/thread?hold=0.2") for _ in range(2)]
        for asker in askers:
            asker.start()
        # Four at once, so that some land on the frozen socket before it is closed.
        streams = [NewConnections(server, {frozen, healthy}, count=10) for _ in range(4)]
        os.kill(frozen, signal.SIGSTOP)
        frozen_at = time.monotonic()
        for stream in streams:
            stream.start()
        try:
            killed_after = wait_until(lambda: not alive(frozen) and time.monotonic() - frozen_at,
                                      what="the frozen server gone", timeout=60, every=0.05)  # fmt: skip
            for stream in streams:
                stream.join(timeout=180)
        finally:
            for asker in askers:
                asker.stop()
            if alive(frozen):
                os.kill(frozen, signal.SIGCONT)
        (replacement,) = set(daphnes(server)) - {healthy}
        log = server.log.read_text()
    assert killed_after < 10, killed_after
    attempts = [attempt for stream in streams for attempt in stream.attempts]
    failures = [failure for stream in streams for failure in stream.failures]
    answers = [attempt for attempt in attempts if attempt[2] is not None]
    assert {status for _, _, status, _ in answers} == {200}
    assert {process for *_, process in answers} == {healthy, replacement}
    failed = [(opened - frozen_at, ended - frozen_at) for opened, ended, status, _ in attempts if status is None]
    answered_again = max((ended for _, ended in failed), default=0)
    print(f"killed after {killed_after:.1f} s, answered again after {answered_again:.1f} s, "
          f"{len(failures)} failed of {len(attempts)}")  # fmt: skip
    assert answered_again < 10, (answered_again, failed, failures)
    assert all(opened < killed_after + 1 for opened, _ in failed), (failed, failures, killed_after)
    for asker in askers:
        assert asker.failures == [] and asker.answers, asker.failures
        assert set(asker.answers) == {(200, healthy)}
    assert f"server process {frozen} silent for" in log


def burners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


@pytest.mark.e2e
def test_a_server_process_busy_computing_is_not_taken_for_a_frozen_one(tmp_path, transactional_db):
    """Two CPU burners beside, every lane of both processes computing for twelve seconds: with
    a liveness of three seconds (the default is more generous) neither process is replaced,
    because the heartbeat is written by the event loop's thread, not by a lane."""
    with serve(tmp_path, workers=2, env={"CONNECT_SERVE_LIVENESS_SECONDS": "3"}) as server:
        before = wait_until(lambda: both_daphnes(server), what="both servers", timeout=60)
        hot = burners(2)
        askers = [Asking(pinned_client(server, before[i % 2]), "/test/spin?seconds=1") for i in range(8)]
        try:
            for asker in askers:
                asker.start()
            time.sleep(12)
        finally:
            for asker in askers:
                asker.stop()
            for burner in hot:
                burner.kill()
                burner.wait()
        assert daphnes(server) == before
    assert "silent for" not in server.log.read_text()
    for asker in askers:
        assert asker.failures == [] and asker.answers, asker.failures
        assert {status for status, _ in asker.answers} == {200}
