"""The fault suite's Markdown table: one row per case, shared by the one-machine runs
(bench/faults.py) and the two-host topology (bench/faults_hosts.py)."""

from __future__ import annotations

from tests.faults.harness import Outcome


def table(outcomes: list[Outcome]) -> str:
    lines = ["| case | events | stream events read | deliveries | faults | lost | duplicates | leaked slots | "
             "non-2xx answers | violations |", "|---|---|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        bad = {k: v for k, v in o.answers.items() if not k.split()[1].startswith("2")}
        lines.append(
            f"| {o.name} | {o.events} | {o.stream_events_read} | {o.deliveries} | {o.faults} | "
            f"{o.lost_stream + o.lost_webhook} | {o.webhook_duplicates + o.stream_duplicates} | {o.leaked_slots} | "
            f"{', '.join(f'{k}: {v}' for k, v in bad.items()) or '0'} | {len(o.violations)} |")
    return "\n".join(lines)
