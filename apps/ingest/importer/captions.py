"""A WebVTT or SRT transcript as a session record of the import format.

The cues become the session's committed segments (start and end in milliseconds; a WebVTT voice
span `<v Speaker>` gives the speaker label; caption line breaks become spaces). The session's
other fields come from a sidecar, `NAME.json` beside `NAME.vtt` / `NAME.srt`: any field of a
JSON Lines record except `committed`. Without a sidecar the file name is the convention: the
external id and the label are the file's stem, the session is `completed`, it started at the
file's modification time and ended at its last cue. Either way the record is then checked by
`parse_record`, like any line of a JSON Lines file."""

from __future__ import annotations

import html
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import srt
import webvtt

from apps.ingest.importer.records import Refused

CAPTION_SUFFIXES = {".vtt", ".srt"}


def caption_record(path: Path) -> dict[str, Any]:
    """The session record (a dict, as a JSON Lines line would give it) of one caption file."""
    committed = _vtt_segments(path) if path.suffix.lower() == ".vtt" else _srt_segments(path)
    sidecar = path.with_suffix(".json")
    if sidecar.exists():
        try:
            record = json.loads(sidecar.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise Refused(f"its sidecar {sidecar.name} is not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise Refused(f"its sidecar {sidecar.name} is a JSON object of session fields")
        if "committed" in record:
            raise Refused(f"its sidecar {sidecar.name} has committed segments; the cues are the committed revision")
        return {**record, "committed": committed}
    started_at = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc).replace(microsecond=0)
    last_ms = max((s["timestampEnd"] for s in committed), default=0)
    return {
        "externalId": path.stem,
        "label": path.stem,
        "status": "completed",
        "startedAt": started_at.isoformat(),
        "endedAt": (started_at + timedelta(milliseconds=last_ms)).isoformat(),
        "committed": committed,
    }


def _vtt_segments(path: Path) -> list[dict[str, Any]]:
    try:
        captions = webvtt.read(str(path)).captions
    except (webvtt.errors.MalformedFileError, webvtt.errors.MalformedCaptionError, UnicodeDecodeError) as exc:
        raise Refused(f"not a WebVTT file: {exc}") from None
    return [
        _segment(c.start_time.in_milliseconds(), c.end_time.in_milliseconds(), c.text, c.voice) for c in captions
    ]


def _srt_segments(path: Path) -> list[dict[str, Any]]:
    try:
        subtitles = list(srt.parse(path.read_text(encoding="utf-8-sig")))
    except (srt.SRTParseError, ValueError) as exc:
        raise Refused(f"not an SRT file: {exc}") from None
    return [_segment(_ms(s.start), _ms(s.end), s.content, None) for s in subtitles]


def _segment(start: int, end: int, text: str, speaker: str | None) -> dict[str, Any]:
    # webvtt-py strips cue tags but leaves character references (&amp;) as written.
    return {
        "timestampStart": start,
        "timestampEnd": end,
        "speakerLabel": speaker.strip() if speaker else None,
        "text": " ".join(html.unescape(text).split()),
        "confidence": None,
    }


def _ms(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)
