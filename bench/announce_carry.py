#!/usr/bin/env python3
"""What a server process spends receiving the commit announcements on Redis: one message per
event with its frame (A, the previous form) against one message per transaction naming its
events (B, apps/events/fanout.wire_message), read as apps/stream/carrier.py reads them
(redis-py's asyncio pub/sub, every buffered message taken per wake-up, the ids parsed). CPU time
of the subscribing process per transaction, A and B alternating.

    .venv/bin/python bench/announce_carry.py --redis redis://127.0.0.1:6379/15 --events 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402
CHANNEL = "connect:bench:announce"
# A segment event's frame as the stream writes it (about the size of a live recording's).
FRAME = (b'id: evt_01KBS0000000000000000000\nevent: transcript.segment.created\ndata: {"type":'
         b'"transcript.segment.created","sessionId":"01KBS00000000000000000000","occurredAt":'
         b'"2026-12-05T22:00:00.000Z","data":{"sessionId":"01KBS00000000000000000000","occurredAt":'
         b'"2026-12-05T22:00:00.000Z","id":"01KBS00000000000000000001","sequence":12,"timestampStart":'
         b'12000,"timestampEnd":13500,"speakerLabel":"A","text":"a sentence of a live meeting, spoken '
         b'now","confidence":0.93,"createdAt":"2026-12-05T22:00:00.000Z"}}\n\n')


def subscriber(url: str, transactions: int) -> None:
    from apps.stream.carrier import Follower

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(url)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(CHANNEL)
        print("ready", flush=True)
        seen, started = 0, None
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
            while message is not None:
                if message["data"] == b"end":
                    print(f"{1e6 * (time.process_time() - started) / transactions:.1f} {seen}", flush=True)
                    return
                if started is None:
                    started = time.process_time()
                seen += len(Follower._announced_ids(message["data"]))
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0)

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--events", type=int, default=3, help="events per transaction")
    parser.add_argument("--transactions", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--subscribe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.subscribe:
        os.environ.setdefault("DATABASE_URL", "sqlite:///unused")
        harness.setup_django()
        return subscriber(args.redis, args.transactions)
    client = redis.Redis.from_url(args.redis)
    figures: dict[str, list[float]] = {"A": [], "B": []}
    for round_ in range(args.rounds):
        for side in ("A", "B") if round_ % 2 == 0 else ("B", "A"):
            sub = subprocess.Popen([sys.executable, __file__, "--subscribe", "--redis", args.redis, "--transactions",
                                    str(args.transactions)], stdout=subprocess.PIPE, text=True)
            assert sub.stdout.readline().strip() == "ready"
            for t in range(args.transactions):
                ids = [f"evt_{t:016d}{k:010d}" for k in range(args.events)]
                pipe = client.pipeline(transaction=False)
                if side == "A":
                    for i in ids:
                        pipe.publish(CHANNEL, orjson.dumps({"i": i, "w": 1, "t": "transcript.segment.created",
                                                            "s": "01KBS00000000000000000000"}) + b"\n" + FRAME)
                else:
                    pipe.publish(CHANNEL, orjson.dumps({"i": ids[0], "n": ids}))
                pipe.execute()
                if t % 50 == 0:
                    time.sleep(0.001)  # as commits arrive: bursts, not one backlog
            client.publish(CHANNEL, b"end")
            cpu, seen = sub.stdout.readline().split()
            sub.wait()
            assert int(seen) == args.events * args.transactions, seen
            figures[side].append(float(cpu))
            print(f"round {round_ + 1} {side}: {float(cpu):.1f} µs CPU a transaction of {args.events} events",
                  flush=True)
    a, b = (sorted(figures[s])[args.rounds // 2] for s in ("A", "B"))
    print(f"median A {a:.1f} / B {b:.1f} µs a transaction: {a / b:.2f}x")


if __name__ == "__main__":
    main()
