"""The few reads MCP needs that REST has no endpoint for: completion's suggestions and one given
board version. Every function takes `workspace=`, so another workspace's rows never appear."""

from __future__ import annotations

from django.db.models import Q

from apps.core.errors import NotFound
from apps.recordings import selectors
from apps.recordings.models import BoardContent, Session
from apps.tenancy.models import Workspace


def session_ids_by_prefix(*, workspace: Workspace, prefix: str, limit: int) -> tuple[list[str], int]:
    """Ids of the sessions whose label starts with `prefix` (case-insensitive) or whose id does,
    newest first (the sessions list's order), at most `limit`; and how many there are."""
    sessions = Session.objects.filter(workspace=workspace)
    if prefix:
        sessions = sessions.filter(Q(label__istartswith=prefix) | Q(id__startswith=prefix))
    ids = list(sessions.order_by("-created_at", "-id").values_list("id", flat=True)[:limit])
    total = len(ids) if len(ids) < limit else sessions.count()
    return ids, total


def board_ids(*, workspace: Workspace, session_id: str) -> list[str]:
    """The session's board ids, in order; none for a session not in `workspace`."""
    found = BoardContent.objects.filter(workspace=workspace, session_id=session_id)
    return list(found.order_by("board_id").values_list("board_id", flat=True).distinct())


def board_versions(*, workspace: Workspace, session_id: str, board_id: str) -> list[int]:
    """The board's versions, newest first."""
    found = BoardContent.objects.filter(workspace=workspace, session_id=session_id, board_id=board_id)
    return list(found.order_by("-version").values_list("version", flat=True))


def board_version(*, workspace: Workspace, session_id: str, board_id: str, version: int) -> BoardContent:
    """One version of a board, current or not."""
    session = selectors.get_session(workspace=workspace, session_id=session_id)
    try:
        return BoardContent.objects.get(session=session, board_id=board_id, version=version)
    except BoardContent.DoesNotExist:
        raise NotFound() from None
