"""The retry schedule (docs/api/limits.md): attempts at 0, 1 m, 5 m, 30 m, 2 h, 8 h, 24 h."""

from __future__ import annotations

from typing import Sequence

DEFAULT_RETRY_DELAYS = (60, 300, 1800, 7200, 28800, 86400)


def max_attempts(delays: Sequence[int]) -> int:
    """The first attempt plus one per delay: 7 with the default schedule."""
    return len(delays) + 1


def delay_after(attempt_number: int, delays: Sequence[int]) -> int | None:
    """Seconds to wait after failed attempt `attempt_number` (1-based), or None when it was
    the last one and the delivery goes to dead letter."""
    if attempt_number < 1:
        raise ValueError("attempts are numbered from 1")
    if attempt_number > len(delays):
        return None
    return int(delays[attempt_number - 1])


def parse_delays(text: str) -> tuple[int, ...]:
    """`CONNECT_WEBHOOK_RETRY_SCHEDULE`: comma-separated non-negative seconds."""
    delays = tuple(int(part) for part in text.split(",") if part.strip())
    if any(d < 0 for d in delays):
        raise ValueError("retry delays are non-negative seconds")
    return delays
