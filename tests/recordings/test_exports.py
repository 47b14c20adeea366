"""The exports' pure core (apps/recordings/exports.py), read back with maintained readers:
webvtt-py for WebVTT, `srt` for SubRip."""

from __future__ import annotations

import html
import io
from dataclasses import dataclass

import pytest
import srt
import webvtt

from apps.recordings import exports


@dataclass
class Seg:
    timestamp_start: int
    timestamp_end: int
    speaker_label: str | None
    text: str


SEGMENTS = [
    Seg(0, 1500, "Ana", "Hello, everyone."),
    Seg(1500, 1500, "Ana", "Zero-length."),  # a 0-ms segment
    Seg(2000, 4000, None, "Nobody said <this> & that."),
    Seg(4000, 5000, "", "An empty label is no speaker."),
    Seg(5000, 9000, "Jürgen <Müller>", "Grüße — 日本語 — «ça»"),
    Seg(3_600_000 * 2 + 61_001, 3_600_000 * 2 + 62_002, "Bo", "Two hours in."),
]


def read_vtt(text: str) -> list:
    return list(webvtt.from_buffer(io.StringIO(text)))


def test_vtt_reads_back_with_timings_voices_and_text():
    body = exports.vtt(exports.cues(SEGMENTS))
    captions = read_vtt(body)
    assert len(captions) == len(SEGMENTS)
    assert [c.start for c in captions][:3] == ["00:00:00.000", "00:00:01.500", "00:00:02.000"]
    assert captions[-1].start == "02:01:01.001" and captions[-1].end == "02:01:02.002"
    assert [html.unescape(c.text) for c in captions] == [s.text for s in SEGMENTS]
    assert [c.voice and html.unescape(c.voice) for c in captions] == [
        "Ana", "Ana", None, None, "Jürgen <Müller>", "Bo"
    ]  # fmt: skip


def test_a_zero_ms_segment_still_ends_after_it_starts():
    zero = exports.cues([SEGMENTS[1]])[0]
    assert (zero.start_ms, zero.end_ms) == (1500, 1501)
    captions = read_vtt(exports.vtt([zero]))
    assert captions[0].start_in_seconds < captions[0].end_in_seconds or captions[0].end == "00:00:01.501"
    subtitle = next(srt.parse(exports.srt([zero])))
    assert subtitle.end > subtitle.start


def test_srt_reads_back_numbered_with_comma_milliseconds():
    body = exports.srt(exports.cues(SEGMENTS))
    assert "00:00:01,500 --> 00:00:01,501" in body
    subtitles = list(srt.parse(body))
    assert [s.index for s in subtitles] == list(range(1, len(SEGMENTS) + 1))
    assert [s.content for s in subtitles] == [
        "Ana: Hello, everyone.", "Ana: Zero-length.", "Nobody said <this> & that.",
        "An empty label is no speaker.", "Jürgen <Müller>: Grüße — 日本語 — «ça»", "Bo: Two hours in.",
    ]  # fmt: skip
    assert subtitles[0].start.total_seconds() == 0 and subtitles[0].end.total_seconds() == 1.5
    assert subtitles[-1].start.total_seconds() == pytest.approx(7261.001)
    # What the reader writes back is what we wrote (the writer's format is the reader's).
    assert srt.compose(subtitles, reindex=False) == body


def test_long_segments_split_at_words_with_interpolated_times():
    text = "one two three four five six seven eight nine ten eleven twelve"
    pieces = exports.cues([Seg(10_000, 16_000, "Ana", text)], max_chars=15)
    assert all(len(c.text) <= 15 for c in pieces)
    assert " ".join(c.text for c in pieces) == text
    assert pieces[0].start_ms == 10_000 and pieces[-1].end_ms == 16_000
    # contiguous and in order, each piece's share proportional to its length
    assert all(a.end_ms == b.start_ms for a, b in zip(pieces, pieces[1:]))
    assert all(a.start_ms < a.end_ms for a in pieces)
    captions = read_vtt(exports.vtt(pieces))
    assert " ".join(c.text for c in captions) == text and all(c.voice == "Ana" for c in captions)
    assert [s.content for s in srt.parse(exports.srt(pieces))][0].startswith("Ana: one two")


def test_a_word_longer_than_the_limit_is_a_cue_of_its_own():
    assert exports.split_words("a supercalifragilistic b", 5) == ["a", "supercalifragilistic", "b"]
    assert exports.split_words("ab cd ef", 5) == ["ab cd", "ef"]
    assert exports.split_words("  spaced\n\nout  ", 100) == ["spaced out"]


def test_cue_text_is_one_line_so_no_blank_line_ends_a_cue_early():
    cue = exports.cues([Seg(0, 1000, "A", "first\n\nsecond --> third")])[0]
    assert cue.text == "first second --> third"
    captions = read_vtt(exports.vtt([cue]))
    assert len(captions) == 1 and html.unescape(captions[0].text) == "first second --> third"


def test_txt_merges_consecutive_turns_of_one_speaker():
    body = exports.txt(SEGMENTS)
    assert body == (
        "Ana: Hello, everyone. Zero-length.\n\n"
        "Nobody said <this> & that. An empty label is no speaker.\n\n"
        "Jürgen <Müller>: Grüße — 日本語 — «ça»\n\n"
        "Bo: Two hours in.\n"
    )


def test_empty_transcripts_are_valid_empty_files():
    assert exports.vtt([]) == "WEBVTT\n"
    assert read_vtt(exports.vtt([])) == []
    assert exports.srt([]) == "" and list(srt.parse("")) == []
    assert exports.txt([]) == ""


@pytest.mark.parametrize("ms, vtt, srt_", [(0, "00:00:00.000", "00:00:00,000"), (3_599_999, "00:59:59.999", "00:59:59,999"),
                                           (360_000_000, "100:00:00.000", "100:00:00,000")])  # fmt: skip
def test_clock(ms, vtt, srt_):
    assert exports.clock(ms, ".") == vtt and exports.clock(ms, ",") == srt_
