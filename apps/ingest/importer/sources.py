"""The records of the files named on the command line, each with where it came from.

A JSON Lines file gives one record per non-blank line (`FILE:LINE`), a caption file one record
(`FILE`); a folder gives its `.jsonl`, `.vtt` and `.srt` files in name order (a caption file's
`.json` sidecar is read with it, not on its own). Reading never stops at a bad record: it is
yielded as a `Refused` in its place, so the loader can report it and go on.

Reading is two steps, `raw_items` (the bytes of a line, or a caption file's path) and `parse`
(the checked record), so that worker processes can parse what one reader hands them
(`apps/ingest/importer/parallel.py`); `items` is both in one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json

import orjson

from apps.ingest.importer.captions import CAPTION_SUFFIXES, caption_record
from apps.ingest.importer.records import Refused, SessionRecord, parse_record

JSONL_SUFFIXES = {".jsonl", ".ndjson"}


@dataclass(frozen=True)
class Item:
    where: str  # FILE:LINE or FILE, for the refusal list
    record: SessionRecord | Refused
    size: int  # bytes of input it consumed, for the progress bar


@dataclass(frozen=True)
class RawItem:
    """One record as read, not yet decoded or checked: a JSON Lines line, or a caption file."""

    where: str
    line: bytes | None  # a JSON Lines line, or None for a caption file (`where` is its path)
    size: int


def expand(paths: list[str]) -> list[Path]:
    """The files to read, in order; an unknown kind of file is an error before anything loads."""
    files: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix.lower() in JSONL_SUFFIXES | CAPTION_SUFFIXES)
        elif not path.exists():
            raise FileNotFoundError(f"{name}: no such file or folder")
        elif path.suffix.lower() not in JSONL_SUFFIXES | CAPTION_SUFFIXES:
            raise ValueError(f"{name}: not a .jsonl, .vtt or .srt file")
        else:
            files.append(path)
    return files


def items(files: list[Path]) -> Iterator[Item]:
    return map(parse, raw_items(files))


def raw_items(files: list[Path]) -> Iterator[RawItem]:
    for path in files:
        if path.suffix.lower() in JSONL_SUFFIXES:
            with path.open("rb") as lines:
                for number, line in enumerate(lines, start=1):
                    if line.strip():
                        yield RawItem(f"{path}:{number}", line, len(line))
        else:
            yield RawItem(str(path), None, path.stat().st_size)


def parse(raw: RawItem) -> Item:
    if raw.line is None:
        return Item(raw.where, _checked(lambda: caption_record(Path(raw.where))), raw.size)
    return Item(raw.where, _checked(lambda: _decode(raw.line)), raw.size)


def external_id(raw: RawItem) -> str | None:
    """The record's `externalId` as written, without checking the record (None when there is no
    string there): what the parallel loader keys on to keep a run's outcome in file order."""
    if raw.line is None:
        record = parse(raw).record
        return record.external_id if isinstance(record, SessionRecord) else None
    try:
        data = orjson.loads(raw.line)
    except orjson.JSONDecodeError:
        return None
    value = data.get("externalId") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _decode(line: bytes) -> Any:
    try:
        return orjson.loads(line)  # refuses NaN, Infinity and out-of-range numbers as JSON does
    except orjson.JSONDecodeError as exc:
        try:
            json.loads(line)  # Python's own parser takes NaN and Infinity: was that the fault?
        except ValueError:
            raise Refused(f"bad JSON: {exc}") from None
        raise Refused("bad JSON: a non-finite number (NaN or Infinity); numbers must be finite") from None


def _checked(read) -> SessionRecord | Refused:
    try:
        return parse_record(read())
    except Refused as refused:
        return refused
