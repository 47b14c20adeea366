"""`import_recordings`: the documented sample loads and reads back through the API, a re-run
changes nothing, bad records are refused one by one with their line, captions with and without
a sidecar, an interrupted run resumes, events only when asked, and one workspace at a time."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.events import filters
from apps.events.models import Event, EventType
from apps.recordings import services
from apps.recordings.models import BoardContent, Segment, Session, Transcript
from apps.tenancy.models import Workspace
from tests import factories
from tests.servers import ROOT

pytestmark = pytest.mark.django_db

SAMPLES = ROOT / "docs" / "samples"
SAMPLE_FILES = [SAMPLES / "recordings.jsonl", SAMPLES / "retro.vtt", SAMPLES / "onboarding.srt"]


def run_import(*args: object) -> tuple[str, str]:
    """Run the command; (stdout, stderr). A run that refused something raises CommandError."""
    out, err = StringIO(), StringIO()
    call_command("import_recordings", *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def run_refusing(*args: object) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="refused"):
        call_command("import_recordings", *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def rows(ws: Workspace | None = None) -> dict[str, list[tuple]]:
    """Every recordings row the importer writes (of one workspace), with its updated_at."""
    scope = {} if ws is None else {"workspace": ws}
    return {
        "sessions": sorted(Session.objects.filter(**scope).values_list("id", "external_id", "status", "updated_at")),
        "transcripts": sorted(Transcript.objects.filter(**scope).values_list("id", "revision_kind", "created_at")),
        "segments": sorted(Segment.objects.filter(**scope).values_list("id", "sequence", "text")),
        "boards": sorted(BoardContent.objects.filter(**scope).values_list("id", "version", "is_current")),
    }


def content(ws: Workspace) -> list[tuple]:
    """What was imported into `ws`, independent of generated ids."""
    sessions = Session.objects.filter(workspace=ws).prefetch_related("transcripts__segments", "boards")
    return sorted(
        (
            s.external_id, s.label, s.status, s.started_at, s.ended_at,
            sorted((t.revision_kind, [(g.sequence, g.timestamp_start, g.speaker_label, g.text)
                                      for g in t.segments.order_by("sequence")]) for t in s.transcripts.all()),
            sorted((b.board_id, b.version, b.is_current, b.payload_hash) for b in s.boards.all()),
        )  # fmt: skip
        for s in sessions
    )


def session_line(external_id: str, **fields) -> str:
    record = {
        "externalId": external_id, "label": f"Meeting {external_id}", "status": "completed",
        "startedAt": "2026-11-01T10:00:00Z", "endedAt": "2026-11-01T10:05:00Z",
        "committed": [{"timestampStart": i * 1000, "timestampEnd": i * 1000 + 900, "speakerLabel": "Ann",
                       "text": f"sentence {i} of {external_id}", "confidence": 0.9} for i in range(3)],
    }  # fmt: skip
    record.update(fields)
    return json.dumps(record)


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


# --- the documented sample ----------------------------------------------------------------------


def test_the_sample_imports_and_reads_back_through_the_api(api, alice, alice_key):
    out, err = run_import(*SAMPLE_FILES, "--workspace", "acme")
    assert last_line(out) == "imported 5 sessions (20 segments), skipped 0 already present, refused 0"
    assert err == ""

    listed = api.get("/api/v1/sessions", alice_key, limit=10).json()["items"]
    assert [s["label"] for s in listed] == [
        "Onboarding walkthrough", "Sprint retrospective", "Engineering stand-up",
        "Customer interview: Northwind", "Weekly product sync",
    ]  # fmt: skip
    weekly = next(s for s in listed if s["label"] == "Weekly product sync")
    assert weekly["status"] == "completed"
    assert weekly["memo"] == "Roadmap check-in before the release"
    assert (weekly["startedAt"], weekly["endedAt"]) == ("2026-11-02T09:00:00.000Z", "2026-11-02T09:00:31.000Z")

    revisions = api.get(f"/api/v1/sessions/{weekly['id']}/transcripts", alice_key).json()
    kinds = {r["revisionKind"]: r["segments"] for r in revisions["transcripts"]}
    assert [s["text"] for s in kinds["final"]][3] == "I'll send the final copy to legal by Wednesday."
    assert [s["text"] for s in kinds["committed"]][3] == "I will send the final copy to legal by Wednesday."
    first = kinds["committed"][0]
    assert (first["sequence"], first["timestampStart"], first["timestampEnd"], first["speakerLabel"]) == (
        0, 0, 4200, "Dana")
    assert first["confidence"] == 0.94
    assert first["createdAt"] == "2026-11-02T09:00:04.200Z"  # committed when spoken

    boards = api.get(f"/api/v1/sessions/{weekly['id']}/boards", alice_key).json()["items"]
    assert sorted((b["boardId"], b["version"], b["isCurrent"], b["sourceRevisionKind"]) for b in boards) == [
        ("action-items", 1, True, "final"), ("summary", 1, False, "committed"), ("summary", 2, True, "final"),
    ]  # fmt: skip
    summary = api.get(f"/api/v1/sessions/{weekly['id']}/boards/summary", alice_key).json()["board"]
    payload = {"text": "Release planned for Thursday; legal reviews the pricing page copy by Wednesday."}
    assert summary["payload"] == payload
    assert summary["payloadHash"] == services.payload_hash(payload)

    retro = next(s for s in listed if s["label"] == "Sprint retrospective")
    flat = api.get(f"/api/v1/sessions/{retro['id']}/transcript", alice_key).json()["transcript"]
    assert [(s["speakerLabel"], s["text"]) for s in flat] == [
        ("Maya", "Let's look back at the last sprint: what went well?"),
        ("Jonas", "The on-call handover was much smoother & faster."),
        ("Maya", "Agreed. What should we change for the next one?"),
    ]

    hits = api.get("/api/v1/transcripts/search", alice_key, query="onboarding buddy").json()["items"]
    assert [h["session"]["label"] for h in hits] == ["Onboarding walkthrough"]


def test_a_rerun_changes_nothing(acme):
    run_import(*SAMPLE_FILES, "--workspace", "acme")
    before = rows()
    events = Event.objects.count()
    out, err = run_import(*SAMPLE_FILES, "--workspace", "acme")
    assert last_line(out) == "imported 0 sessions (0 segments), skipped 5 already present, refused 0"
    assert err == ""
    assert rows() == before  # same ids, same updated_at: nothing rewritten
    assert Event.objects.count() == events


def test_a_folder_imports_its_files_and_a_record_twice_is_one_session(acme):
    out, _ = run_import(SAMPLES, SAMPLES / "recordings.jsonl", "--workspace", "acme")
    assert last_line(out) == "imported 5 sessions (20 segments), skipped 3 already present, refused 0"
    assert Session.objects.filter(workspace=acme).count() == 5


def test_a_changed_record_is_refused_and_the_stored_session_left_unchanged(acme, tmp_path):
    run_import(write_jsonl(tmp_path / "a.jsonl", [session_line("m-1"), session_line("m-2")]), "--workspace", "acme")
    before = rows()
    changed = write_jsonl(tmp_path / "b.jsonl", [session_line("m-1"), session_line("m-2", label="Renamed")])
    out, err = run_refusing(changed, "--workspace", "acme")
    assert last_line(out) == "imported 0 sessions (0 segments), skipped 1 already present, refused 1"
    assert err.strip() == (f"{changed}:2: externalId 'm-2' is already in the workspace with other content; "
                           "left unchanged (delete that session to load this one)")  # fmt: skip
    assert rows() == before


# --- refusals -----------------------------------------------------------------------------------


def segment(**fields) -> dict:
    return {"timestampStart": 0, "timestampEnd": 900, "text": "hello", **fields}


def board(**fields) -> dict:
    return {"boardId": "summary", "status": "ready", "sourceRevisionKind": "final", "payload": {}, **fields}


BAD_LINES = [
    ('{"externalId": "cut-off", "status": ', "bad JSON"),
    (session_line("nan").replace('"confidence": 0.9', '"confidence": NaN', 1), "non-finite number"),
    (session_line("inf").replace('"timestampEnd": 900', '"timestampEnd": Infinity', 1), "non-finite number"),
    (session_line("huge", committed=[segment(timestampEnd=1e999)]), "non-finite number"),
    ('["a", "list"]', "a session is a JSON object, not a list"),
    (json.dumps({"status": "completed", "startedAt": "2026-11-01T10:00:00Z"}), "externalId is required"),
    (session_line("st", status="done"), "status 'done' is not one of recording, processing, completed, failed"),
    (session_line("ends", endedAt="2026-11-01T09:00:00Z"), "endedAt is before startedAt"),
    (session_line("open", endedAt=None), "a completed session has ended: endedAt is required"),
    (session_line("naive", startedAt="2026-11-01T10:00:00"), "has no time zone"),
    (session_line("when", startedAt="yesterday"), "startedAt is an ISO 8601 time"),
    (session_line("notime", startedAt=None, endedAt=None, status="recording"), "startedAt or createdAt is required"),
    (session_line("back", committed=[segment(timestampStart=500, timestampEnd=100)]),
     "committed[0] ends before it starts"),
    (session_line("frac", committed=[segment(timestampStart=1.5)]), "committed[0].timestampStart is a whole number"),
    (session_line("neg", committed=[segment(timestampStart=-1)]), "committed[0].timestampStart is a whole number"),
    (session_line("notext", committed=[segment(text="")]), "committed[0].text is required"),
    (session_line("long", committed=[segment(text="x" * 10_001)]),
     "committed[0].text is 10001 characters; at most 10000"),
    (session_line("nul", final=[segment(text="a\u0000b")]), "final[0].text holds a NUL character"),
    (session_line("conf", committed=[segment(confidence=1.5)]), "committed[0].confidence is a number from 0.0 to 1.0"),
    (session_line("dup", committed=[segment(sequence=1), segment(sequence=1)]), "sequence must be unique"),
    (session_line("extra", colour="blue"), "session has unknown field(s) colour"),
    (session_line("a b"), "externalId must match [A-Za-z0-9._~:@+=-]{1,200} (the ingest API takes it in its paths)"),
    (session_line("bid", boards=[board(boardId="notes/2")]), "boards[0].boardId must match [A-Za-z0-9._:-]{1,100}"),
    (session_line("memo", memo="m" * 20_001), "memo is 20001 characters; at most 20000"),
    (session_line("segx", committed=[segment(words=[])]), "committed[0] has unknown field(s) words"),
    (session_line("bst", boards=[board(status="done")]),
     "boards[0].status 'done' is not one of generating, ready, failed"),
    (session_line("bkind", boards=[board(sourceRevisionKind="x")]),
     "boards[0].sourceRevisionKind 'x' is not one of committed, final"),
    (session_line("bpay", boards=[{"boardId": "summary", "status": "ready", "sourceRevisionKind": "final"}]),
     "boards[0].payload is required"),
    (session_line("bbig", boards=[{"boardId": "s", "status": "ready", "sourceRevisionKind": "final",
                                   "payload": {"t": "x" * 300_000}}]), "boards[0].payload is 300008 bytes as JSON"),
]  # fmt: skip


def test_a_file_with_broken_lines_loads_the_good_ones_and_reports_each_bad_one_with_its_line(acme, tmp_path):
    lines = [session_line("good-1")]
    for bad, _ in BAD_LINES:
        lines += [bad]
    lines += ["", "   ", session_line("good-2")]  # blank lines are not records
    path = write_jsonl(tmp_path / "history.jsonl", lines)

    out, err = run_refusing(path, "--workspace", "acme")
    assert last_line(out) == f"imported 2 sessions (6 segments), skipped 0 already present, refused {len(BAD_LINES)}"
    reported = err.strip().splitlines()
    assert len(reported) == len(BAD_LINES)
    for number, ((_, why), line) in enumerate(zip(BAD_LINES, reported), start=2):
        assert line.startswith(f"{path}:{number}: "), line
        assert why in line, (why, line)
    assert sorted(Session.objects.filter(workspace=acme).values_list("external_id", flat=True)) == ["good-1", "good-2"]


def test_an_unknown_file_kind_or_a_missing_file_is_an_error_before_anything_loads(acme, tmp_path):
    good = write_jsonl(tmp_path / "a.jsonl", [session_line("m-1")])
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CommandError, match="not a .jsonl, .vtt or .srt file"):
        run_import(good, tmp_path / "notes.txt", "--workspace", "acme")
    with pytest.raises(CommandError, match="no such file or folder"):
        run_import(good, tmp_path / "missing.jsonl", "--workspace", "acme")
    assert not Session.objects.exists()


# --- captions -----------------------------------------------------------------------------------


def test_vtt_and_srt_with_a_sidecar_take_its_session_fields(acme):
    run_import(SAMPLES / "retro.vtt", SAMPLES / "onboarding.srt", "--workspace", "acme")
    retro = Session.objects.get(external_id="rec-2026-11-05-retro")
    assert (retro.label, retro.status, retro.memo) == (
        "Sprint retrospective", "completed", "Imported from the recorder's WebVTT export")
    assert retro.started_at == datetime(2026, 11, 5, 16, 0, tzinfo=timezone.utc)
    segments = Segment.objects.filter(transcript__session=retro).order_by("sequence")
    assert [(s.timestamp_start, s.timestamp_end, s.speaker_label) for s in segments] == [
        (0, 5200, "Maya"), (5400, 11000, "Jonas"), (11300, 17800, "Maya")]
    onboarding = Session.objects.get(external_id="rec-2026-11-06-onboarding")
    segments = Segment.objects.filter(transcript__session=onboarding).order_by("sequence")
    assert [(s.timestamp_start, s.timestamp_end, s.speaker_label, s.text) for s in segments] == [
        (0, 4000, None, "Welcome to the team, this is your first week plan."),
        (4500, 9250, None, "On Monday you'll set up your laptop and meet your onboarding buddy."),
    ]


def test_a_caption_without_a_sidecar_is_named_by_its_file(acme, tmp_path):
    vtt = tmp_path / "standup-2026-11-09.vtt"
    vtt.write_text("WEBVTT\n\n00:00:01.000 --> 00:00:03.500\n<v Kim>Morning all.\n")
    modified = datetime(2026, 11, 9, 8, 30, tzinfo=timezone.utc)
    os.utime(vtt, (modified.timestamp(), modified.timestamp()))
    run_import(vtt, "--workspace", "acme")
    s = Session.objects.get(workspace=acme)
    assert (s.external_id, s.label, s.status) == ("standup-2026-11-09", "standup-2026-11-09", "completed")
    assert (s.started_at, s.ended_at) == (modified, datetime(2026, 11, 9, 8, 30, 3, 500000, tzinfo=timezone.utc))
    out, _ = run_import(vtt, "--workspace", "acme")
    assert "skipped 1 already present" in last_line(out)


def test_a_broken_caption_or_sidecar_is_refused_by_file(acme, tmp_path):
    (tmp_path / "a.vtt").write_text("this is not WebVTT\n")
    (tmp_path / "b.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nhello\n\n")
    (tmp_path / "b.json").write_text('{"externalId": "b", "status": "finished"}')
    (tmp_path / "c.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nhello\n\n")
    (tmp_path / "c.json").write_text("{not json")
    out, err = run_refusing(tmp_path, "--workspace", "acme")
    assert last_line(out).endswith("refused 3")
    assert err.strip().splitlines() == [
        f"{tmp_path / 'a.vtt'}: not a WebVTT file: Invalid format",
        f"{tmp_path / 'b.srt'}: status 'finished' is not one of recording, processing, completed, failed",
        f"{tmp_path / 'c.srt'}: its sidecar c.json is not JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)",
    ]


# --- interruption -------------------------------------------------------------------------------


def test_an_interrupted_run_leaves_whole_sessions_and_a_rerun_finishes_it(acme, globex, tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "history.jsonl", [session_line(f"m-{i}") for i in range(120)])
    run_import(path, "--workspace", "globex")  # the uninterrupted result, for comparison

    real, calls = services.import_sessions, []

    def fails_on_the_80th(**kwargs):
        calls.append(1)
        if len(calls) == 80:
            raise KeyboardInterrupt  # as ^C would, between two sessions or inside one
        return real(**kwargs)

    monkeypatch.setattr(services, "import_sessions", fails_on_the_80th)
    with pytest.raises(KeyboardInterrupt):
        run_import(path, "--workspace", "acme")
    monkeypatch.setattr(services, "import_sessions", real)
    assert Session.objects.filter(workspace=acme).count() == 79
    assert all(len(c[5][0][1]) == 3 for c in content(acme))  # every stored session is whole

    out, _ = run_import(path, "--workspace", "acme")
    assert last_line(out) == "imported 41 sessions (123 segments), skipped 79 already present, refused 0"
    assert [c[1:] for c in content(acme)] == [c[1:] for c in content(globex)]


# --- events -------------------------------------------------------------------------------------


def test_without_emit_events_no_event_is_recorded(acme):
    run_import(*SAMPLE_FILES, "--workspace", "acme")
    assert Session.objects.filter(workspace=acme).count() == 5
    assert not Event.objects.exists()


def test_with_emit_events_each_change_records_its_event_and_the_rows_are_the_same(acme, globex):
    run_import(*SAMPLE_FILES, "--workspace", "acme", "--emit-events")
    run_import(*SAMPLE_FILES, "--workspace", "globex")
    assert [c for c in content(acme)] == [c for c in content(globex)]

    events = list(Event.objects.filter(workspace=acme).order_by("position", "id"))
    by_type = {t: [e for e in events if e.type == t] for t in EventType.values}
    assert len(by_type[EventType.SESSION_CREATED]) == 5
    assert len(by_type[EventType.TRANSCRIPT_SEGMENT_CREATED]) == Segment.objects.filter(
        workspace=acme, transcript__revision_kind="committed").count() == 15
    # Every session has ended: one change from recording each (the sample's are all past it).
    assert sorted((e.data["previousStatus"], e.data["status"]) for e in by_type[EventType.SESSION_STATUS_CHANGED]) == [
        ("recording", "completed"), ("recording", "completed"), ("recording", "completed"),
        ("recording", "failed"), ("recording", "processing"),
    ]  # fmt: skip
    weekly = Session.objects.get(workspace=acme, external_id="rec-2026-11-02-weekly")
    created = next(e for e in by_type[EventType.SESSION_CREATED] if e.session_id == weekly.id)
    assert created.occurred_at == datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc)  # its historic time
    # The final revisions and board versions record their internal events too (for live
    # resources; no public reader shows them), as a live producer's would.
    internal = [e.type for e in Event.objects.filter(workspace=acme, type__in=filters.INTERNAL_TYPES)]
    finals = Transcript.objects.filter(workspace=acme, revision_kind="final").count()
    assert finals and internal.count(filters.TRANSCRIPT_REVISION_REPLACED) == finals
    assert internal.count(filters.BOARD_VERSION_CREATED) == BoardContent.objects.filter(workspace=acme).count()

    out, _ = run_import(*SAMPLE_FILES, "--workspace", "acme", "--emit-events")
    assert "skipped 5 already present" in last_line(out)
    assert Event.objects.filter(workspace=acme).count() == len(events)  # a re-run records nothing


# --- tenancy ------------------------------------------------------------------------------------


def test_the_workspace_option_keeps_imports_apart(api, alice_key, bob_key, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [session_line("shared-id")])
    run_import(path, "--workspace", "acme")
    out, _ = run_import(path, "--workspace", "globex")  # the same external id elsewhere is another session
    assert last_line(out).startswith("imported 1 sessions")
    acme_ids = [s["id"] for s in api.get("/api/v1/sessions", alice_key).json()["items"]]
    globex_ids = [s["id"] for s in api.get("/api/v1/sessions", bob_key).json()["items"]]
    assert len(acme_ids) == len(globex_ids) == 1 and acme_ids != globex_ids
    assert api.get(f"/api/v1/sessions/{globex_ids[0]}", alice_key).status_code == 404


def test_without_workspace_option_only_a_single_workspace_is_assumed(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [session_line("m-1")])
    only = factories.workspace("solo")
    run_import(path)
    assert Session.objects.get().workspace == only
    factories.workspace("other")
    with pytest.raises(CommandError, match="--workspace SLUG"):
        run_import(path)
    with pytest.raises(CommandError, match="no workspace 'nope'"):
        run_import(path, "--workspace", "nope")
    assert Session.objects.count() == 1
