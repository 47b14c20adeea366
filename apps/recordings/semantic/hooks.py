"""Embedding after commit: a session's new segments get their vectors from a django-q2 task
queued once the transaction that wrote them commits, so the append path only adds a callback.

Two ways in, both ending in `schedule`: the event outbox (`on_event_recorded`, connected in
RecordingsConfig.ready) for appended segments, each of which records an event; and the final
revision's writer, which records none, calls `schedule` itself. One transaction queues one task
per session, however many segments it wrote."""

from __future__ import annotations

import logging

from django.db import connection, transaction

from apps.events.models import EventType
from apps.recordings.semantic import enabled

logger = logging.getLogger("connect.recordings")

TASK = "apps.recordings.tasks.embed_session"
# A worker's first task loads the model (seconds; more on a busy machine) and a final revision
# of thousands of segments takes a while: more than the cluster's default bound for webhook work.
TASK_TIMEOUT = 600


class _QueueAfterCommit:
    """The on-commit callback for one session: an object, so that a transaction's later
    segments find it among the callbacks already registered and add none."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.done = False

    def __call__(self) -> None:
        from django_q.tasks import async_task

        self.done = True
        try:
            async_task(TASK, self.session_id, q_options={"save": False, "timeout": TASK_TIMEOUT,
                                                          "task_name": f"embed {self.session_id}"})  # fmt: skip
        except Exception:  # noqa: BLE001 - the segments are committed; the backfill command embeds what is missed
            logger.exception("could not queue embedding for session %s; `manage.py embed_segments` will", self.session_id)


def schedule(session_id: str) -> None:
    """Queue the embedding of the session's new segments after the current transaction commits
    (at once outside one). Does nothing while search by meaning is off."""
    if not enabled():
        return
    if connection.in_atomic_block and any(
        isinstance(callback, _QueueAfterCommit) and callback.session_id == session_id and not callback.done
        for _, callback, _ in connection.run_on_commit
    ):
        return
    transaction.on_commit(_QueueAfterCommit(session_id))


def on_event_recorded(sender, event, **kwargs) -> None:  # noqa: ARG001
    if event.type == EventType.TRANSCRIPT_SEGMENT_CREATED:
        schedule(event.session_id)


def connect() -> None:
    from apps.events.signals import event_recorded

    event_recorded.connect(on_event_recorded, dispatch_uid="recordings.semantic.event_recorded")
