"""`import_recordings` as an operator runs it, in its own process on this test's database:
docs/import.md's command as written, its record example, a run killed mid-file that a re-run
completes (with one process and with worker processes), worker processes giving the outcome of
one process, and the progress bar that only a terminal gets."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys

import pytest

from apps.recordings.models import Segment, Session
from tests import docs, factories
from tests.servers import ROOT, server_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = ROOT / "docs" / "import.md"
SECONDS = 300  # one command on a busy machine; only a hang reaches it


def manage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=server_env(), capture_output=True,
                          text=True, timeout=SECONDS)  # fmt: skip


def test_the_import_page_command_runs_as_written():
    factories.workspace("demo")  # as `make run` leaves it
    [block] = [b for b in docs.blocks(PAGE) if b.info == "sh" and "import_recordings" in b.text]
    [line] = block.text.strip().splitlines()
    argv = line.split()
    assert argv[:3] == [".venv/bin/python", "manage.py", "import_recordings"]

    first = manage(*argv[2:])
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == "imported 5 sessions (20 segments), skipped 0 already present, refused 0"
    assert first.stderr == ""  # no progress bar when stdout is not a terminal
    summary = next(line.strip() for line in docs.indented_lines(PAGE) if line.startswith("imported "))
    assert summary == first.stdout.splitlines()[-1]  # the page shows what it prints

    again = manage(*argv[2:])
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == "imported 0 sessions (0 segments), skipped 5 already present, refused 0"


def test_the_import_page_record_imports(tmp_path):
    factories.workspace("acme")
    [block] = [b for b in docs.blocks(PAGE) if b.info == "json record"]
    record = json.loads(block.text)
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(record) + "\n")
    done = manage("import_recordings", str(path), "--workspace", "acme")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "imported 1 sessions (4 segments), skipped 0 already present, refused 0"
    assert Session.objects.get().external_id == record["externalId"]


@pytest.mark.parametrize(("jobs", "stop"), [(1, signal.SIGKILL), (2, signal.SIGKILL), (2, signal.SIGINT)],
                         ids=["killed", "killed-with-workers", "ctrl-c-with-workers"])  # fmt: skip
def test_a_killed_import_leaves_whole_sessions_and_a_rerun_completes_it(tmp_path, jobs, stop):
    ws = factories.workspace("acme")
    sessions, per_session = 1500, 40
    path = tmp_path / "history.jsonl"
    with path.open("w") as out:
        for i in range(sessions):
            out.write(json.dumps({
                "externalId": f"m-{i}", "status": "completed",
                "startedAt": "2026-11-01T10:00:00Z", "endedAt": "2026-11-01T11:00:00Z",
                "committed": [{"timestampStart": n * 1000, "timestampEnd": n * 1000 + 900,
                               "text": f"line {n} of meeting {i}"} for n in range(per_session)],
            }) + "\n")  # fmt: skip

    command = [sys.executable, "manage.py", "import_recordings", str(path), "--workspace", "acme", "--jobs", str(jobs)]
    # A session of its own, so the signal reaches the workers too, as a terminal's job control
    # would; Ctrl-C's default restored (a test run started in the background ignores it).
    process = subprocess.Popen(command, cwd=ROOT, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        stored = Session.objects.filter(workspace=ws)
        wait_until(lambda: stored.count() >= 50, what="50 sessions loaded", timeout=SECONDS)
        # SIGKILL: no clean-up of any kind, mid-session, mid-transaction. SIGINT: Ctrl-C, which
        # the command answers by stopping its workers before it exits.
        os.killpg(process.pid, stop)
        assert process.wait(timeout=SECONDS) != 0
    finally:
        process.kill()
        process.wait(timeout=SECONDS)
    loaded = Session.objects.filter(workspace=ws).count()
    assert 50 <= loaded < sessions, "the run finished before it was killed: make the file larger"
    assert Segment.objects.filter(workspace=ws).count() == loaded * per_session  # whole sessions only

    done = manage("import_recordings", str(path), "--workspace", "acme", "--jobs", str(jobs))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"imported {sessions - loaded:,} sessions ({(sessions - loaded) * per_session:,} segments), "
        f"skipped {loaded:,} already present, refused 0"
    )
    texts = Segment.objects.filter(workspace=ws, transcript__session__external_id="m-1499").order_by("sequence")
    assert list(texts.values_list("text", flat=True)) == [f"line {n} of meeting 1499" for n in range(per_session)]
    assert Session.objects.filter(workspace=ws).count() == sessions
    assert Segment.objects.filter(workspace=ws).count() == sessions * per_session


def test_worker_processes_give_the_outcome_of_one_process(tmp_path):
    """Bad lines, a record repeated unchanged and one repeated changed (near its first and far
    from it): the same summary, the same refusals in the same order, the same stored rows."""
    one, workers = factories.workspace("one"), factories.workspace("workers")

    def record(i: int, label: str | None = None) -> str:
        return json.dumps({
            "externalId": f"m-{i}", "label": label or f"Meeting {i}", "status": "completed",
            "startedAt": "2026-11-01T10:00:00Z", "endedAt": "2026-11-01T11:00:00Z",
            "committed": [{"timestampStart": n * 1000, "timestampEnd": n * 1000 + 900, "speakerLabel": "Ann",
                           "text": f"line {n} of meeting {i}"} for n in range(5)],
            "final": [{"timestampStart": 0, "timestampEnd": 4900, "text": f"all of meeting {i}"}],
            "boards": [{"boardId": "summary", "status": "ready", "sourceRevisionKind": "final",
                        "payload": {"text": f"summary {i}"}}],
        })  # fmt: skip

    lines = [record(i) for i in range(60)]
    lines[7] = '{"externalId": "cut-off", '
    lines.insert(9, record(8, label="Changed near"))  # right after its first
    lines.insert(30, record(3))  # unchanged, far from its first
    lines.insert(50, record(20, label="Changed far"))
    lines.append('["not", "a", "session"]')
    path = tmp_path / "history.jsonl"
    path.write_text("".join(line + "\n" for line in lines))

    first = manage("import_recordings", str(path), "--workspace", "one")
    second = manage("import_recordings", str(path), "--workspace", "workers", "--jobs", "2")
    assert first.returncode == second.returncode == 1  # something was refused: listed, the rest loaded
    summary = "imported 59 sessions (354 segments), skipped 1 already present, refused 4"
    assert first.stdout.splitlines()[-1] == second.stdout.splitlines()[-1] == summary
    assert second.stderr.splitlines() == first.stderr.splitlines()
    assert [line.split(": ")[0] for line in first.stderr.splitlines()[:4]] == [
        f"{path}:8", f"{path}:10", f"{path}:51", f"{path}:64"
    ]

    def stored(ws) -> list[tuple]:
        sessions = Session.objects.filter(workspace=ws).prefetch_related("transcripts__segments", "boards")
        return sorted(
            (s.external_id, s.label, s.status, s.started_at, s.ended_at, s.created_at, s.updated_at,
             sorted((t.revision_kind, t.created_at, [(g.sequence, g.timestamp_start, g.timestamp_end, g.speaker_label,
                                                      g.text, g.created_at) for g in t.segments.order_by("sequence")])
                    for t in s.transcripts.all()),
             sorted((b.board_id, b.version, b.is_current, b.payload_hash, b.created_at) for b in s.boards.all()))
            for s in sessions
        )  # fmt: skip

    assert len(stored(workers)) == 59
    assert stored(workers) == stored(one)
    again = manage("import_recordings", str(path), "--workspace", "workers", "--jobs", "2")
    assert again.stdout.splitlines()[-1] == "imported 0 sessions (0 segments), skipped 60 already present, refused 4"


def test_a_progress_bar_only_on_a_terminal():
    factories.workspace("acme")
    sample = str(ROOT / "docs" / "samples" / "recordings.jsonl")
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "manage.py", "import_recordings", sample, "--workspace", "acme"],
                              cwd=ROOT, env=server_env(), stdout=secondary, stderr=subprocess.PIPE, text=True,
                              timeout=SECONDS)  # fmt: skip
    finally:
        os.close(secondary)
    terminal = b""
    while select.select([primary], [], [], 0.5)[0]:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal's other end is closed and drained
            break
        if not chunk:
            break
        terminal += chunk
    os.close(primary)
    assert done.returncode == 0, done.stderr
    assert "importing: 100%" in done.stderr  # tqdm's bar, on stderr, because stdout is a terminal
    summary = "imported 3 sessions (15 segments), skipped 0 already present, refused 0"
    assert terminal.decode().splitlines()[-1] == summary
