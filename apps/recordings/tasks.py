"""The recordings app's task-cluster work (django-q2), queued by apps/recordings/semantic/hooks.py."""

from __future__ import annotations


def embed_session(session_id: str) -> int:
    """Vectors for the session's segments that have none of the current model; returns how many
    were written. Idempotent: a second task of the same session finds nothing left."""
    from apps.recordings.semantic import enabled
    from apps.recordings.semantic.embedders import current
    from apps.recordings.semantic.writer import embed, pending_of_session

    if not enabled():
        return 0
    embedder = current()
    return embed(pending_of_session(session_id, embedder.name), embedder)
