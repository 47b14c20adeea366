"""Vectors follow the segments: written by the task queued after commit (appends through the
event outbox, the final revision by its writer), deleted with the segment, replaced when its
text or the model changes; the backfill command resumes where it stopped."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django_q.conf import Conf

from apps.recordings import services
from apps.recordings.models import Segment, SegmentEmbedding
from apps.recordings.semantic import installed
from tests import factories
from tests.recordings.semantic_set import embed_everything, needs_extra, semantic_on  # noqa: F401

pytestmark = needs_extra

if installed():  # numpy and the model: the extra's (requirements/semantic.txt)
    from apps.recordings.semantic import embedders, hooks
    from apps.recordings.semantic.writer import text_hash


@pytest.fixture
def tasks_inline(monkeypatch):
    """django-q2 runs a queued task at once, in this process (its `sync` mode): the task the
    commit queues is the real one, through async_task."""
    monkeypatch.setattr(Conf, "SYNC", True)


def vectors_of(session) -> dict[str, str]:
    """segment id: the model of its vector."""
    ids = Segment.objects.filter(transcript__session=session).values_list("id", flat=True)
    return dict(SegmentEmbedding.objects.filter(segment_id__in=list(ids)).values_list("segment_id", "model"))


def test_appends_are_embedded_by_one_task_after_commit(acme, semantic_on, tasks_inline,
                                                       django_capture_on_commit_callbacks):  # fmt: skip
    session = services.create_session(workspace=acme, label="live", memo=None)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.append_committed_segments(session=session, segments=factories.segments(["one", "two", "three"]))
    # Nothing before the commit; one task for the transaction's three segments.
    assert not SegmentEmbedding.objects.exists()
    queued = [c for c in callbacks if isinstance(c, hooks._QueueAfterCommit)]
    assert len(queued) == 1
    queued[0]()
    assert set(vectors_of(session).values()) == {embedders.current().name} and len(vectors_of(session)) == 3
    with django_capture_on_commit_callbacks(execute=True):
        services.append_committed_segments(session=session, segments=factories.segments(["four"]))
    assert len(vectors_of(session)) == 4
    row = SegmentEmbedding.objects.get(segment_id=Segment.objects.get(transcript__session=session, sequence=3).id)
    assert row.text_hash == text_hash("four") and len(bytes(row.vector)) == embedders.current().dimensions


def test_the_final_revision_is_embedded_and_rewriting_it_drops_the_old_vectors(acme, semantic_on, tasks_inline,
                                                                                django_capture_on_commit_callbacks):  # fmt: skip
    session = factories.session(acme, completed=True)
    with django_capture_on_commit_callbacks(execute=True):
        services.write_final_transcript(session=session, segments=factories.segments(["alpha", "beta"]))
    first = set(vectors_of(session))
    assert len(first) == 2
    with django_capture_on_commit_callbacks(execute=True):
        services.write_final_transcript(session=session, segments=factories.segments(["gamma"]))
    assert len(vectors_of(session)) == 1 and not first & set(vectors_of(session))
    assert SegmentEmbedding.objects.count() == 1  # the old revision's vectors went with its segments


def test_deleting_a_session_deletes_its_vectors_and_a_changed_text_is_embedded_again(acme, semantic_on):
    keep = factories.session(acme, committed=["we keep this"])
    gone = factories.session(acme, committed=["we delete this", "and this"])
    embed_everything()
    assert SegmentEmbedding.objects.count() == 3
    gone.delete()
    assert list(SegmentEmbedding.objects.values_list("segment_id", flat=True)) == list(vectors_of(keep))
    segment = Segment.objects.get(transcript__session=keep)
    Segment.objects.filter(pk=segment.pk).update(text="the text was corrected")
    assert not SegmentEmbedding.objects.exists()  # a stale vector is never read
    from apps.recordings.tasks import embed_session

    assert embed_session(keep.id) == 1
    assert SegmentEmbedding.objects.get().text_hash == text_hash("the text was corrected")


def test_a_model_change_re_embeds_instead_of_mixing_spaces(api, acme, alice_key, semantic_on, monkeypatch):
    session = factories.session(acme, committed=["Finance caps the offsite at forty thousand.", "Hotel booked."])
    embed_everything()
    old = embedders.current().name
    assert set(vectors_of(session).values()) == {old}
    monkeypatch.setattr(embedders.current(), "name", old + "+next")
    # Vectors of the old model are not compared with the new one's query.
    body = api.get("/api/v1/transcripts/search", alice_key, query="spending limit", mode="semantic").json()
    assert body["items"] == []
    from apps.recordings.tasks import embed_session

    assert embed_session(session.id) == 2
    assert set(vectors_of(session).values()) == {old + "+next"} and SegmentEmbedding.objects.count() == 2
    body = api.get("/api/v1/transcripts/search", alice_key, query="spending limit", mode="semantic").json()
    assert body["items"][0]["session"]["id"] == session.id


def test_the_backfill_resumes_where_it_stopped(acme, globex, settings):
    settings.CONNECT_SEMANTIC_SEARCH = False  # data written while search by meaning was off
    sessions = [factories.session(acme, committed=[f"acme {n}", f"more {n}"]) for n in range(3)]
    factories.session(globex, committed=["globex"])
    assert not SegmentEmbedding.objects.exists()
    out = io.StringIO()
    with pytest.raises(Exception, match="CONNECT_SEMANTIC_SEARCH=1"):
        call_command("embed_segments", stdout=out)
    settings.CONNECT_SEMANTIC_SEARCH = True
    call_command("embed_segments", "--limit", "4", stdout=out, stderr=io.StringIO())  # stopped part way
    assert SegmentEmbedding.objects.count() == 4
    call_command("embed_segments", "--workspace", acme.slug, stdout=out, stderr=io.StringIO())
    assert sum(len(vectors_of(s)) for s in sessions) == 6
    call_command("embed_segments", stdout=out, stderr=io.StringIO())
    assert SegmentEmbedding.objects.count() == 7
    call_command("embed_segments", stdout=out, stderr=io.StringIO())
    assert out.getvalue().splitlines()[-1].startswith("embedded 0 segments")
