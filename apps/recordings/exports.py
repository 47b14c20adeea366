"""Transcript exports: WebVTT, SubRip (SRT) and plain text, from segments. A pure core: no
Django, no database; apps/recordings/api.py feeds it the rows of the transcript fast path.

`cues` turns segments into caption cues, which `vtt` and `srt` write; `txt` writes speaker
turns from the segments themselves. An empty transcript is a valid empty file of each format
(`WEBVTT` and a blank line for WebVTT, empty for the other two)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class SegmentLike(Protocol):
    timestamp_start: int
    timestamp_end: int
    speaker_label: str | None
    text: str


@dataclass(frozen=True)
class Cue:
    start_ms: int
    end_ms: int
    speaker: str | None  # None: no speaker (a missing or empty label)
    text: str


def split_words(text: str, max_chars: int) -> list[str]:
    """`text`'s words in pieces of at most `max_chars` characters (spaces included), broken only
    between words; a word longer than `max_chars` is a piece of its own."""
    pieces: list[str] = []
    current = ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > max_chars:
            pieces.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        pieces.append(current)
    return pieces


def cues(segments: Iterable[SegmentLike], max_chars: int | None = None) -> list[Cue]:
    """A segment's text is one cue unless it is longer than `max_chars`: then it is split at word
    boundaries (a single word longer than `max_chars` stays whole in its own cue) and the
    segment's time is shared among the pieces in proportion to their length. Whitespace inside a
    cue is collapsed to single spaces (a caption is one run of text; a blank line would end the
    cue). A cue lasts at least 1 ms: both formats require the end after the start, so a 0-ms
    segment ends 1 ms after it starts."""
    out: list[Cue] = []
    for segment in segments:
        speaker = segment.speaker_label or None
        start, end = segment.timestamp_start, max(segment.timestamp_end, segment.timestamp_start)
        words = " ".join(segment.text.split())
        if not words:
            continue
        pieces = [words] if max_chars is None or len(words) <= max_chars else split_words(words, max_chars)
        total = sum(len(p) for p in pieces)
        done = 0
        for piece in pieces:
            piece_start = start + (end - start) * done // total
            done += len(piece)
            piece_end = start + (end - start) * done // total
            out.append(Cue(piece_start, max(piece_end, piece_start + 1), speaker, piece))
    return out


def clock(ms: int, separator: str) -> str:
    """`HH:MM:SS.mmm` (WebVTT, separator ".") or `HH:MM:SS,mmm` (SRT, ","); hours grow past 99."""
    seconds, millis = divmod(max(0, ms), 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{millis:03d}"


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def vtt(items: Iterable[Cue]) -> str:
    """`WEBVTT`, then each cue with `HH:MM:SS.mmm --> HH:MM:SS.mmm` timings and the speaker as a
    `<v Speaker>` voice tag (none when the segment has no speaker label); `&`, `<` and `>` are
    escaped as the WebVTT syntax requires."""
    blocks = ["WEBVTT\n"]
    for cue in items:
        timing = f"{clock(cue.start_ms, '.')} --> {clock(cue.end_ms, '.')}"
        text = _vtt_escape(cue.text)
        if cue.speaker is not None:
            # A voice tag's annotation runs to ">": the escaped speaker cannot end it early.
            text = f"<v {_vtt_escape(' '.join(cue.speaker.split()))}>{text}</v>"
        blocks.append(f"{timing}\n{text}\n")
    return "\n".join(blocks)


def srt(items: Iterable[Cue]) -> str:
    """Numbered cues from 1, `HH:MM:SS,mmm` timings, the speaker as a `Speaker: ` prefix (SRT has
    no voice markup), each cue followed by a blank line (as `srt.compose` writes)."""
    blocks = []
    for number, cue in enumerate(items, start=1):
        text = cue.text if cue.speaker is None else f"{' '.join(cue.speaker.split())}: {cue.text}"
        blocks.append(f"{number}\n{clock(cue.start_ms, ',')} --> {clock(cue.end_ms, ',')}\n{text}\n\n")
    return "".join(blocks)


def txt(segments: Iterable[SegmentLike]) -> str:
    """Speaker turns: consecutive segments of one speaker merged into one paragraph
    (`Speaker: text`), paragraphs separated by a blank line."""
    turns: list[tuple[str | None, list[str]]] = []
    for segment in segments:
        speaker = segment.speaker_label or None
        text = " ".join(segment.text.split())
        if not text:
            continue
        if turns and turns[-1][0] == speaker:
            turns[-1][1].append(text)
        else:
            turns.append((speaker, [text]))
    paragraphs = [
        " ".join(texts) if speaker is None else f"{' '.join(speaker.split())}: {' '.join(texts)}"
        for speaker, texts in turns
    ]
    return "\n\n".join(paragraphs) + ("\n" if paragraphs else "")
