"""Full-text search over transcript segments (implemented with the FTS migration)."""

from __future__ import annotations

from dataclasses import dataclass

from apps.recordings.models import Session, Transcript


@dataclass(frozen=True)
class SearchHit:
    transcript: Transcript
    session: Session
    snippet: str


def search_transcripts(*, workspace, query: str, limit: int, revision_kind: str | None = None, cursor: str | None = None):
    raise NotImplementedError
