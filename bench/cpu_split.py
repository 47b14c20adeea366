"""Where a live run's CPU went, by role: the server processes one by one, the task cluster,
the run's PostgreSQL backends, Redis, the benchmark's own clients, and the rest of the machine.

A thread samples /proc every `every` seconds between `start()` and `stop()`: each process's
utime + stime and, for the server processes, the run-queue wait of their threads (runnable,
waiting for a core: /proc/<pid>/task/*/schedstat). A process first seen after the first sample
started during the window and counts from zero; one that exits keeps its last sample.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _runqueue_wait(pid: int) -> float:
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[1])
            except (OSError, IndexError):
                pass
    except OSError:
        pass
    return total / 1e9


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                out += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _machine_busy() -> tuple[float, float]:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / TICKS, sum(fields[:8]) / TICKS


class CpuSplit:
    def __init__(self, *, server_pid: int, database: str, clients: dict[str, list[int]], every: float = 0.5) -> None:
        self.server_pid, self.database, self.clients, self.every = server_pid, database, clients, every
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.role: dict[int, str] = {}
        self.wait0: dict[int, float] = {}
        self.wait1: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._samples = 0

    def _roles(self) -> dict[int, str]:
        roles = {self.server_pid: "task cluster and serve"}
        workers = 0
        for pid in _descendants(self.server_pid):
            if "engine.daphne_worker" in _cmdline(pid):
                roles[pid] = f"server process {chr(ord('A') + workers)}"
                workers += 1
            else:
                roles[pid] = "task cluster and serve"
        for name, pids in self.clients.items():
            for pid in pids:
                roles[pid] = name
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            if pid in roles:
                continue
            command = _cmdline(pid)
            if command.startswith("postgres: ") and f" {self.database} " in command:
                roles[pid] = "PostgreSQL backends of the run"
            elif command.startswith("postgres: ") or command.startswith("/usr/lib/postgresql"):
                roles[pid] = "PostgreSQL (other: shared processes, other databases)"
            elif command.startswith("redis-server") or "redis-server" in command.split(" ")[0]:
                roles[pid] = "Redis"
        return roles

    def _sample(self) -> None:
        first = self._samples == 0
        for pid, role in self._roles().items():
            value = _stat(pid)
            if value is None:
                continue
            if pid not in self.first:
                self.first[pid] = value if first else 0.0
                self.role[pid] = role
                if role.startswith("server process"):
                    self.wait0[pid] = _runqueue_wait(pid) if first else 0.0
            self.last[pid] = value
            if role.startswith("server process"):
                self.wait1[pid] = _runqueue_wait(pid)
        self._samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def start(self) -> None:
        self.busy0, self.total0 = _machine_busy()
        self.wall0 = time.monotonic()
        self._sample()
        self._thread.start()

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self._sample()
        wall = time.monotonic() - self.wall0
        busy1, total1 = _machine_busy()
        by_role: dict[str, float] = {}
        for pid, value in self.last.items():
            by_role[self.role[pid]] = by_role.get(self.role[pid], 0.0) + value - self.first[pid]
        machine = busy1 - self.busy0
        by_role["rest of the machine (other helpers, the kernel)"] = machine - sum(by_role.values())
        waits = {self.role[pid]: self.wait1.get(pid, 0.0) - w for pid, w in self.wait0.items()}
        return {"wall_s": wall, "cores": (total1 - self.total0) / wall, "machine_busy_s": machine,
                "cpu_s": dict(sorted(by_role.items(), key=lambda kv: -kv[1])),
                "server_runqueue_wait_s": waits}


def table(split: dict, appends: int) -> str:
    wall = split["wall_s"]
    lines = [f"CPU over {wall:.1f} s ({split['cores']:.1f} cores, {split['machine_busy_s'] / wall:.2f} busy):", "",
             "| role | CPU s | cores | share of the machine's busy time | ms per append |", "|---|---:|---:|---:|---:|"]
    for role, seconds in split["cpu_s"].items():
        lines.append(f"| {role} | {seconds:.1f} | {seconds / wall:.2f} | "
                     f"{100 * seconds / max(1e-9, split['machine_busy_s']):.0f} % | {1000 * seconds / max(1, appends):.2f} |")
    for role, seconds in split["server_runqueue_wait_s"].items():
        lines.append(f"| run-queue wait, {role} (threads runnable, no core) | {seconds:.1f} | | | |")
    return "\n".join(lines) + "\n"
