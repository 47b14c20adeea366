"""Encode cost of the transcript hot path: a 500-segment flat transcript (`GET
/api/v1/sessions/{id}/transcript`, MCP `get_transcript`) from model instances to JSON bytes,
written five ways, each producing the same bytes (checked before timing):

- `hand-written`: the representation function as written by hand before the shapes
  (apps/recordings/representations.py at 56306b3, copied below) + orjson;
- `shape (generated)`: today's `flat_segment_repr`, generated from apps/recordings/shapes.py + orjson;
- `shape (loop)`: the same declaration read field by field at run time instead of generated
  code (what a declaration costs without code generation);
- `dataclass`: a slotted dataclass per segment, serialised by orjson natively;
- `pydantic`: a pydantic v2 model per segment (validated on construction) + `model_dump_json`;
- `msgspec`: a `msgspec.Struct` per segment + `msgspec.json.encode` (only when msgspec is
  importable: it is not a dependency; `pip install --target /tmp/msgspec msgspec==0.22.0` and
  `PYTHONPATH=/tmp/msgspec` to include it).

    .venv/bin/python bench/wire_encode.py [--segments 500] [--rounds 7] [--number 200]

No database: the segments are unsaved model instances with every field set, as the selector
returns them. Each figure is the best and the median of `--rounds` rounds of `--number` calls,
the variants interleaved round by round so machine noise falls on all of them.
"""

from __future__ import annotations

import argparse
import dataclasses
import operator
import os
import statistics
import sys
import timeit
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()

import orjson  # noqa: E402

from apps.core.shapes import TIMESTAMP  # noqa: E402
from apps.core.timestamps import iso_ms  # noqa: E402
from apps.recordings.models import Segment  # noqa: E402
from apps.recordings.representations import flat_segment_repr  # noqa: E402
from apps.recordings.shapes import FLAT_SEGMENT  # noqa: E402


def hand_written_flat_segment_repr(segment: Segment) -> dict:
    return {
        "id": segment.id,
        "sequence": segment.sequence,
        "timestampStart": segment.timestamp_start,
        "timestampEnd": segment.timestamp_end,
        "speakerLabel": segment.speaker_label,
        "text": segment.text,
        "confidence": segment.confidence,
        "createdAt": iso_ms(segment.created_at),
    }


@dataclasses.dataclass(slots=True)
class FlatSegmentData:
    id: str
    sequence: int
    timestampStart: int  # noqa: N815 - wire names
    timestampEnd: int  # noqa: N815
    speakerLabel: str | None  # noqa: N815
    text: str
    confidence: float | None
    createdAt: str  # noqa: N815


@dataclasses.dataclass(slots=True)
class FlatTranscriptData:
    sessionId: str  # noqa: N815
    transcript: list[FlatSegmentData]


def segments(count: int) -> list[Segment]:
    start = datetime(2026, 1, 5, 9, 30, tzinfo=timezone.utc)
    return [
        Segment(
            id=f"01jd8x5k2p{i:016d}",
            transcript_id="01jd8x5k2ptranscript000000",
            sequence=i,
            session_committed_index=i,
            timestamp_start=i * 4000,
            timestamp_end=i * 4000 + 3500,
            speaker_label=None if i % 7 == 0 else f"Speaker {i % 3}",
            text=f"Segment {i}: we talked about the roadmap, the budget and the release — “quoted” {i * 31}.",
            confidence=None if i % 11 == 0 else 0.5 + (i % 50) / 101,
            created_at=start + timedelta(milliseconds=1234 * i),
        )
        for i in range(count)
    ]


def variants(rows: list[Segment], session_id: str) -> dict[str, object]:
    def hand_written() -> bytes:
        return orjson.dumps({"sessionId": session_id, "transcript": [hand_written_flat_segment_repr(s) for s in rows]})

    def shape() -> bytes:
        return orjson.dumps({"sessionId": session_id, "transcript": [flat_segment_repr(s) for s in rows]})

    fields = [(f.name, operator.attrgetter(f.path), f.kind == TIMESTAMP)
              for f in FLAT_SEGMENT.fields]

    def shape_loop() -> bytes:
        return orjson.dumps({"sessionId": session_id, "transcript": [
            {name: iso_ms(get(s)) if stamp else get(s) for name, get, stamp in fields} for s in rows
        ]})

    def dataclass() -> bytes:
        return orjson.dumps(FlatTranscriptData(session_id, [
            FlatSegmentData(s.id, s.sequence, s.timestamp_start, s.timestamp_end, s.speaker_label, s.text,
                            s.confidence, iso_ms(s.created_at))
            for s in rows
        ]))

    found: dict[str, object] = {
        "hand-written": hand_written, "shape (generated)": shape, "shape (loop)": shape_loop, "dataclass": dataclass,
    }

    try:
        import pydantic
    except ImportError:
        pydantic = None
    if pydantic is not None:
        class PydanticSegment(pydantic.BaseModel):
            id: str
            sequence: int
            timestampStart: int  # noqa: N815
            timestampEnd: int  # noqa: N815
            speakerLabel: str | None  # noqa: N815
            text: str
            confidence: float | None
            createdAt: str  # noqa: N815

        class PydanticTranscript(pydantic.BaseModel):
            sessionId: str  # noqa: N815
            transcript: list[PydanticSegment]

        def pydantic_model() -> bytes:
            return PydanticTranscript(sessionId=session_id, transcript=[
                PydanticSegment(id=s.id, sequence=s.sequence, timestampStart=s.timestamp_start,
                                timestampEnd=s.timestamp_end, speakerLabel=s.speaker_label, text=s.text,
                                confidence=s.confidence, createdAt=iso_ms(s.created_at))
                for s in rows
            ]).model_dump_json().encode()

        found[f"pydantic {pydantic.VERSION}"] = pydantic_model

    try:
        import msgspec
    except ImportError:
        msgspec = None
    if msgspec is not None:
        class StructSegment(msgspec.Struct):
            id: str
            sequence: int
            timestampStart: int  # noqa: N815
            timestampEnd: int  # noqa: N815
            speakerLabel: str | None  # noqa: N815
            text: str
            confidence: float | None
            createdAt: str  # noqa: N815

        class StructTranscript(msgspec.Struct):
            sessionId: str  # noqa: N815
            transcript: list[StructSegment]

        encoder = msgspec.json.Encoder()

        def struct() -> bytes:
            return encoder.encode(StructTranscript(session_id, [
                StructSegment(s.id, s.sequence, s.timestamp_start, s.timestamp_end, s.speaker_label, s.text,
                              s.confidence, iso_ms(s.created_at))
                for s in rows
            ]))

        found[f"msgspec {msgspec.__version__}"] = struct
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=200)
    args = parser.parse_args()

    rows = segments(args.segments)
    found = variants(rows, "01jd8x5k2p0000000000000000")
    reference = found["hand-written"]()
    for name, function in found.items():
        produced = function()
        if produced != reference:
            raise SystemExit(f"{name} does not produce the hand-written function's bytes")
    timings: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(args.rounds):
        for name, function in found.items():
            seconds = timeit.timeit(function, number=args.number)
            timings[name].append(seconds / args.number * 1e6)

    base = statistics.median(timings["hand-written"])
    print(f"{args.segments} segments, {len(reference):,} bytes, {args.rounds} rounds x {args.number} calls; "
          f"Python {sys.version.split()[0]}, orjson {orjson.__version__}")
    print()
    print("| variant | best µs | median µs | median vs hand-written |")
    print("|---|---:|---:|---:|")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"| {name} | {min(values):,.0f} | {median:,.0f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
