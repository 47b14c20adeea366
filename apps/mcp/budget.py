"""The per-result size budget: no MCP result carries more than `CONNECT_MCP_RESULT_BUDGET_BYTES`
of text (UTF-8 bytes of the JSON or plain text a host puts into a model's context).

Results are built to fit rather than cut afterwards: a page takes whole items while they fit in
the budget less `RESERVE` (the envelope, the note, the cursor), and whatever is left is named
by a note with the way to get it (a cursor, a continuation URI). Only a single item larger than
the whole budget is ever sliced, and then as text with its own continuation, never silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from django.conf import settings

# Room kept for what a page carries besides its items: the envelope's keys, `totalSegments`,
# the note (a sentence and a URI) and a signed cursor (under 300 bytes).
RESERVE = 2_000


def budget() -> int:
    return settings.CONNECT_MCP_RESULT_BUDGET_BYTES


def room() -> int:
    """What the items of one page may take."""
    return max(budget() - RESERVE, 1_000)


def size(value: Any) -> int:
    """Bytes of `value` as compact JSON, as results are sent."""
    return len(orjson.dumps(value))


def fitting(sizes: Iterable[int], space: int) -> int:
    """How many leading items of these sizes fit in `space`, JSON array commas counted."""
    used = count = 0
    for item in sizes:
        used += item + (1 if count else 0)
        if used > space:
            break
        count += 1
    return count


def cut_field(item: dict[str, Any], key: str, space: int) -> dict[str, Any]:
    """`item` with its text field `key` shortened until the item's JSON fits `space` bytes (JSON
    escapes can make a character up to six bytes, so the cut is checked, not computed)."""
    text = item[key] or ""
    end = text_slice(text, 0, max(space - size({**item, key: ""}), 1))
    while end > 1 and size({**item, key: text[:end]}) > space:
        end = text_slice(text, 0, max(len(text[:end].encode()) * 3 // 4, 1))
    return {**item, key: text[:end]}


def text_slice(text: str, start: int, space: int) -> int:
    """The end (a character offset) of the longest slice of `text` from `start` whose UTF-8
    fits in `space` bytes; at least one character, so a page always advances."""
    end = min(len(text), start + space)  # a character is at least one byte
    while end > start + 1 and len(text[start:end].encode()) > space:
        over = len(text[start:end].encode()) - space
        end -= max(1, over // 4)
    return max(end, start + 1) if start < len(text) else start
