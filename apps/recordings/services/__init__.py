"""Writes to recordings. Every change to workspace data goes through here (admin actions,
commands, producers, tests), because this is where its realtime event is recorded.

One module per kind of write: `sessions` (a session's row and its lock), `transcripts`
(segments), `boards`, `backfill` (bulk history, no events) and `search_index` (upkeep). Callers
use the names below, `services.X`: a stored task schedule names
`apps.recordings.services.compact_search_index`, and a test that replaces `services.X` replaces
it for every caller outside this package (inside it, a name is looked up in its submodule)."""

from __future__ import annotations

from apps.recordings.services.backfill import ImportedBoard, ImportedSession, import_sessions, refresh_statistics
from apps.recordings.services.boards import payload_hash, publish_board, put_board
from apps.recordings.services.search_index import SEARCH_MERGE_MAX_STEPS, SEARCH_MERGE_PAGES, compact_search_index
from apps.recordings.services.sessions import (
    SESSION_FIELDS,
    STATUS_TRANSITIONS,
    InvalidTimes,
    InvalidTransition,
    change_session_status,
    create_session,
    put_external_session,
    set_session_status,
    update_session,
)
from apps.recordings.services.transcripts import (
    SegmentInput,
    SequenceConflict,
    SequencedAppend,
    SessionClosed,
    append_committed_segments,
    append_sequenced_segments,
    write_final_transcript,
)

__all__ = [
    "SEARCH_MERGE_MAX_STEPS", "SEARCH_MERGE_PAGES", "SESSION_FIELDS", "STATUS_TRANSITIONS", "ImportedBoard",
    "ImportedSession", "InvalidTimes", "InvalidTransition", "SegmentInput", "SequenceConflict", "SequencedAppend",
    "SessionClosed", "append_committed_segments", "append_sequenced_segments", "change_session_status",
    "compact_search_index", "create_session", "import_sessions", "payload_hash", "publish_board", "put_board",
    "put_external_session", "refresh_statistics", "set_session_status", "update_session", "write_final_transcript",
]  # fmt: skip
