"""Holders: other processes, each on its own database connection, that record events in one
transaction and keep it open until the test says commit. They force the interleavings the event
log's readers must survive (a transaction that commits after a later one, or while a subscription
commits), with real transactions rather than patched clocks.

Every holder ends with its test (`end_holders`, autouse where it is imported): one left open by a
failing test would hold its transaction, the log's horizon and the teardown's TRUNCATE for ever."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.servers import ROOT, server_env

WAIT = 120

# Records events in one transaction and commits when told (stdin). argv: the workspace of the
# first event and its session label, then, after "go", optionally a second workspace and label to
# record in the same transaction.
ONE_BY_ONE = """
import sys
import django
django.setup()
from django.db import transaction
from django.utils import timezone
from apps.events.services import record_event

def record(workspace_id, label):
    return record_event(workspace_id=workspace_id, type="session.created", session_id=label,
                        occurred_at=timezone.now(), data={"sessionId": label})

with transaction.atomic():
    print(record(sys.argv[1], sys.argv[2]).id, flush=True)
    sys.stdin.readline()
    if len(sys.argv) > 3:
        print(record(sys.argv[3], sys.argv[4]).id, flush=True)
        sys.stdin.readline()
print("committed", flush=True)
"""

# Records `count` events in one transaction (argv: workspace, count), says the first id, and
# commits when told.
MANY = """
import sys
import django
django.setup()
from django.db import transaction
from django.utils import timezone
from apps.events.services import record_event

with transaction.atomic():
    ids = [record_event(workspace_id=sys.argv[1], type="session.created", session_id=f"bulk-{i}",
                        occurred_at=timezone.now(), data={"sessionId": f"bulk-{i}"}).id
           for i in range(int(sys.argv[2]))]
    print(ids[0], flush=True)
    sys.stdin.readline()
print("committed", flush=True)
"""

_OPEN: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def end_holders():
    yield
    while _OPEN:
        process = _OPEN.pop()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=WAIT)


class Holder:
    """Another process, its own connection: records an event and keeps its transaction open.

    `env` is the process's environment (the test settings by default; a live server's, when a
    drain it asks for after its commit must reach that server's queue)."""

    def __init__(self, *args, script: str = ONE_BY_ONE, env: dict | None = None) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], cwd=ROOT,
                                        env=env or server_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        _OPEN.append(self.process)
        self.event_ids = [self._line()]

    @property
    def event_id(self) -> str:
        """The first event it recorded."""
        return self.event_ids[0]

    def _line(self) -> str:
        line = self.process.stdout.readline().strip()
        assert line.startswith("evt_") or line == "committed", f"the holder said {line!r}"
        return line

    def go(self) -> None:
        """Record the second event (same transaction, still open)."""
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        self.event_ids.append(self._line())

    def commit(self) -> None:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        assert self._line() == "committed"
        assert self.process.wait(timeout=WAIT) == 0
