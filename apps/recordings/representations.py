"""How recordings look on the wire. REST, MCP, the event stream and webhooks all call these:
if two entry points formatted a Session differently, one of them would be wrong. Each function
is built from its shape's one declaration in apps/recordings/shapes.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.recordings import shapes
from apps.recordings.models import Session, SessionStatus

session_summary_repr = shapes.SESSION_SUMMARY.encode
# A Session, or a named row of SESSION_FIELDS.
session_repr = shapes.SESSION.encode
flat_segment_repr = shapes.FLAT_SEGMENT.encode
revision_segment_repr = shapes.REVISION_SEGMENT.encode
# (transcript, segments)
transcript_revision_repr = shapes.TRANSCRIPT_REVISION.encode
# (transcript, session, snippet)
search_hit_repr = shapes.SEARCH_HIT.encode
board_summary_repr = shapes.BOARD_SUMMARY.encode
board_repr = shapes.BOARD.encode

# A session row whose timestamps the database wrote in wire form (selectors.SESSION_ROWS): the
# sessions list and session get, REST and MCP.
session_row_repr = shapes.SESSION.encode_formatted

# The fields session_repr reads: a listing can fetch just these as named rows
# (`values_list(*SESSION_FIELDS, named=True)`), which cost far less than model instances.
SESSION_FIELDS = shapes.SESSION.source_attributes()
# The transcript fast path (apps/recordings/selectors.py `transcript_rows`) reads segments as
# tuples of the fields their shapes read, and revisions as named rows; these take them, with the
# database's `stamp` (selectors.TranscriptRows.stamp). Each is one function per stamp:
# flat_transcript_rows_repr(stamp)(session_id, segments) is the whole flat body.
def flat_segment_rows_repr(stamp=None):
    return shapes.FLAT_SEGMENT.encode_rows(stamp)


def flat_transcript_rows_repr(stamp=None):
    return shapes.FLAT_TRANSCRIPT.encode_with_rows(stamp)


def transcript_revision_rows_repr(stamp=None):
    return shapes.TRANSCRIPT_REVISION.encode_with_rows(stamp)


# Event data (docs/api/events-and-stream.md), recorded by apps/recordings/services/.
session_created_data = shapes.SESSION_CREATED_DATA.encode
session_status_changed_data = shapes.SESSION_STATUS_CHANGED_DATA.encode
transcript_segment_created_data = shapes.TRANSCRIPT_SEGMENT_CREATED_DATA.encode


def example_session_created(at: datetime) -> tuple[str, dict[str, Any]]:
    """A `session.created` event's session id and data at `at`, for the stream's documentation."""
    session = Session(id="01jd8x5k2p0000000000000000", label="Kickoff", memo=None, status=SessionStatus.RECORDING,
                      started_at=at, ended_at=None, created_at=at, updated_at=at)  # fmt: skip
    return session.id, session_created_data(session, at)
