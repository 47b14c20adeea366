#!/usr/bin/env python3
"""The stream follower's poll in process: the log read over every workspace and the frames of
what it read, as the ORM path (`selectors.read_log` + `representations.frame_for`, model
instances) against the written-out one (`selectors.follow_log` + `frame_for_row`), A and B
alternating round by round on the same log, CPU time of this process and of its database
backend per poll.

    .venv/bin/python bench/follow_read.py --db postgres://postgres@127.0.0.1:5432/connect_x

A poll reads `--batch` events after a place (segment events, as a live recording's appends
record them, spread over several workspaces); `--polls` polls a round.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 5, 50])
    parser.add_argument("--polls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    harness.setup_django(DATABASE_URL=args.db)
    from django.core.management import call_command
    from django.db import connection

    from apps.events import selectors
    from apps.events.models import Event
    from apps.events.positions import Position
    from apps.events.representations import frame_for, frame_for_row
    from apps.recordings import services
    from apps.recordings.services import SegmentInput
    from apps.tenancy.models import Workspace

    call_command("migrate", verbosity=0)
    if not Event.objects.filter(type="transcript.segment.created").count() >= 2000:
        for w in range(4):
            workspace, _ = Workspace.objects.get_or_create(slug=f"follow-{w}", defaults={"name": f"follow {w}"})
            session = services.create_session(workspace=workspace, label="follow")
            for i in range(0, 600, 3):
                services.append_committed_segments(session=session, segments=[
                    SegmentInput(100 * (i + k), 100 * (i + k) + 90, f"segment {i + k} of a live meeting", "A", 0.9)
                    for k in range(3)])
    first = Event.objects.order_by("position", "id").first()
    start = Position(first.position, first.id, 0)

    def orm(limit: int) -> int:
        events, _ = selectors.read_log(after=start, limit=limit)
        return len([(e.workspace_id, e.type, e.session_id, (e.position, e.id), frame_for(e)) for e in events])

    def rows(limit: int) -> int:
        found, _ = selectors.follow_log(after=start, limit=limit)
        return len([(r.workspace_id, r.type, r.session_id, (r.position, r.id), frame_for_row(r)) for r in found])

    assert orm(50) == rows(50) == 50
    with connection.cursor() as cursor:
        for batch in args.batch:
            figures: dict[str, list[float]] = {"orm": [], "rows": []}
            for round_ in range(args.rounds):
                pair = (("orm", orm), ("rows", rows))
                for name, poll in (pair if round_ % 2 == 0 else pair[::-1]):
                    backend, client = harness.backend_cpu(cursor), time.process_time()
                    for _ in range(args.polls):
                        poll(batch)
                    backend, client = harness.backend_cpu(cursor) - backend, time.process_time() - client
                    figures[name].append(1e6 * (backend + client) / args.polls)
                    print(f"batch {batch:3} round {round_ + 1} {name:4}: {1e6 * client / args.polls:7.0f} µs client "
                          f"+ {1e6 * backend / args.polls:6.0f} µs backend a poll", flush=True)
            a, b = sorted(figures["orm"])[args.rounds // 2], sorted(figures["rows"])[args.rounds // 2]
            print(f"batch {batch:3}: median {a:.0f} / {b:.0f} µs a poll, {a / b:.2f}x, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
