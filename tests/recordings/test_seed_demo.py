from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count
from django.utils import timezone

from apps.recordings.models import BoardContent, RevisionKind, Segment, Session, Transcript
from apps.recordings.services import payload_hash
from apps.tenancy.models import Membership, Workspace

pytestmark = pytest.mark.django_db


def seed(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("seed_demo", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def content(ws: Workspace) -> list[tuple]:
    """What a seed wrote, independent of generated ids."""
    sessions = Session.objects.filter(workspace=ws).prefetch_related("transcripts__segments")
    return sorted(
        (s.label or "", s.memo or "", s.status, sorted(g.text for t in s.transcripts.all() for g in t.segments.all()))
        for s in sessions
    )


def test_default_workspace_member_and_summary_line():
    out, _ = seed("--sessions", "3", "--segments", "5")
    ws = Workspace.objects.get(slug="demo")
    member = Membership.objects.select_related("user").get(workspace=ws)
    assert member.user.email == "demo@example.com"
    assert member.is_active and member.user.is_staff
    assert member.user.check_password("demo-password")
    assert last_line(out).startswith("demo: 3 sessions (3 created,")


def test_running_twice_creates_nothing_new():
    seed("--workspace", "acme-demo", "--sessions", "6", "--segments", "8")
    def counts() -> tuple[int, ...]:
        return tuple(m.objects.count() for m in (Session, Transcript, Segment, BoardContent))

    before = counts()
    out, _ = seed("--workspace", "acme-demo", "--sessions", "6", "--segments", "8")
    assert counts() == before
    assert "(0 created, 0 segments, 0 board versions)" in last_line(out)
    assert Membership.objects.filter(workspace__slug="acme-demo").count() == 1


def test_a_larger_count_adds_only_the_missing_sessions():
    seed("--workspace", "grow", "--sessions", "4", "--segments", "6")
    out, _ = seed("--workspace", "grow", "--sessions", "7", "--segments", "6")
    assert last_line(out).startswith("grow: 7 sessions (3 created,")
    grown = content(Workspace.objects.get(slug="grow"))
    assert len(grown) == 7

    # Growing in two runs writes the same meetings as seeding all of them at once.
    Workspace.objects.get(slug="grow").delete()
    seed("--workspace", "grow", "--sessions", "7", "--segments", "6")
    assert content(Workspace.objects.get(slug="grow")) == grown


def test_same_seed_same_content_other_seed_other_content():
    seed("--workspace", "repro", "--sessions", "5", "--segments", "6")
    before = content(Workspace.objects.get(slug="repro"))
    Workspace.objects.get(slug="repro").delete()
    seed("--workspace", "repro", "--sessions", "5", "--segments", "6")
    assert content(Workspace.objects.get(slug="repro")) == before
    Workspace.objects.get(slug="repro").delete()
    seed("--workspace", "repro", "--sessions", "5", "--segments", "6", "--seed", "7")
    assert content(Workspace.objects.get(slug="repro")) != before


def test_sessions_cover_every_status_with_the_right_revisions_and_boards():
    seed("--sessions", "40", "--segments", "4")
    sessions = Session.objects.filter(workspace__slug="demo")
    assert set(sessions.values_list("status", flat=True)) == {"recording", "processing", "completed", "failed"}
    for s in sessions.prefetch_related("transcripts", "boards"):
        kinds = {t.revision_kind for t in s.transcripts.all()}
        boards = list(s.boards.all())
        if s.status == "completed":
            assert kinds == {RevisionKind.COMMITTED, RevisionKind.FINAL}
            assert {b.board_id for b in boards} == {"summary", "action-items", "decisions"}
            for board_id in ("summary", "action-items", "decisions"):
                versions = sorted((b for b in boards if b.board_id == board_id), key=lambda b: b.version)
                assert 1 <= len(versions) <= 3
                assert [b.version for b in versions] == list(range(1, len(versions) + 1))
                assert [b.is_current for b in versions] == [False] * (len(versions) - 1) + [True]
                assert versions[-1].status == "ready"
            assert s.ended_at is not None and s.ended_at > s.started_at
        else:
            assert kinds == {RevisionKind.COMMITTED}
        if s.status == "recording":
            assert s.ended_at is None and boards == []
        if s.status == "processing":
            assert [(b.board_id, b.status) for b in boards] == [("summary", "generating")]
    for board in BoardContent.objects.all():
        assert board.payload_hash == payload_hash(board.payload)


def test_committed_segments_are_ordered_timed_and_spoken_by_several_people():
    seed("--sessions", "5", "--segments", "30")
    for t in Transcript.objects.filter(revision_kind="committed"):
        segs = list(t.segments.order_by("session_committed_index"))
        assert len(segs) == 30
        assert [s.sequence for s in segs] == list(range(30))
        assert all(a.timestamp_end <= b.timestamp_start for a, b in zip(segs, segs[1:]))
        assert all(0 <= s.confidence <= 1 and s.text for s in segs)
    per_session_speakers = (
        Segment.objects.values("transcript")
        .annotate(n=Count("speaker_label", distinct=True))
        .values_list("n", flat=True)
    )
    assert max(per_session_speakers) >= 2


def test_created_at_is_in_the_past_and_spread_over_weeks():
    seed("--sessions", "25", "--segments", "2")
    now = timezone.now()
    created = list(Session.objects.values_list("created_at", flat=True))
    assert max(created) < now
    assert max(created) - min(created) > timedelta(days=7)
    assert not Segment.objects.filter(created_at__gt=now).exists()
    assert not BoardContent.objects.filter(created_at__gt=now).exists()


def test_progress_bar_goes_to_stderr_for_large_seeds_only():
    _, err = seed("--sessions", "3", "--segments", "1")
    assert err == ""
    out, err = seed("--sessions", "103", "--segments", "1")
    assert "\r[" in err and "100/100 sessions" in err
    assert "\r" not in out


@pytest.mark.django_db(transaction=True)
def test_parallel_jobs_write_the_same_meetings_as_one_process():
    out, _ = seed("--workspace", "par", "--sessions", "6", "--segments", "5", "--jobs", "3")
    assert last_line(out).startswith("par: 6 sessions (6 created,")
    parallel = content(Workspace.objects.get(slug="par"))
    Workspace.objects.get(slug="par").delete()
    seed("--workspace", "par", "--sessions", "6", "--segments", "5")
    assert content(Workspace.objects.get(slug="par")) == parallel


@pytest.mark.parametrize("args", [["--segments", "0"], ["--sessions", "-1"], ["--jobs", "0"]])
def test_invalid_sizes_are_errors(args):
    with pytest.raises(CommandError):
        seed(*args)


def test_a_seed_that_wrote_rows_refreshes_the_planners_statistics_on_postgresql():
    """Search picks its plan from the planner's estimates; a bulk load leaves the tables without
    any until autovacuum's next pass, and a common word then took 251 ms instead of 38 ms."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as first:
        seed("--sessions", "2", "--segments", "5")
    with CaptureQueriesContext(connection) as again:
        seed("--sessions", "2", "--segments", "5")  # nothing new to write
    analyzed = [q["sql"] for q in first.captured_queries if q["sql"].startswith("ANALYZE")]
    if connection.vendor == "postgresql":
        assert analyzed and "recordings_segment" in analyzed[0]
    else:
        assert analyzed == []
    assert not any(q["sql"].startswith("ANALYZE") for q in again.captured_queries)
