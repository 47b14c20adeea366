"""`import_recordings PATH… [--workspace SLUG] [--emit-events] [--jobs N]`: load a team's history.

Reads JSON Lines files (one session a line) and WebVTT/SRT transcripts (with a sidecar or by the
file-name convention), as docs/import.md describes. A re-run changes nothing, and a run that was
interrupted continues where it stopped. The last line of stdout is the summary; each refused
record is listed on stderr with its FILE:LINE and why, and then the exit status is 1."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from apps.ingest.importer import loading, parallel, sources
from apps.tenancy.models import Workspace


class Command(BaseCommand):
    help = (
        "Load historic sessions from JSON Lines files and WebVTT/SRT transcripts (docs/import.md). "
        "Idempotent and resumable; records no events unless --emit-events. Prints a summary as "
        "the last line and lists refused records on stderr (exit status 1 when any was refused)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", help=".jsonl, .vtt or .srt files, or folders of them")
        parser.add_argument("--workspace", help="workspace slug (may be left out when there is only one)")
        parser.add_argument(
            "--emit-events",
            action="store_true",
            help="record each session's events as a live producer's (streams, the event log and "
            "webhooks see them); off by default, so history is not replayed",
        )
        parser.add_argument(
            "--jobs",
            type=int,
            default=1,
            help="worker processes that write sessions side by side (PostgreSQL: each keeps one "
            "database process busy; SQLite has one writer, so more than 1 gains little there); "
            "the outcome is the same as with 1",
        )

    def handle(
        self, *args, paths: list[str], workspace: str | None, emit_events: bool, jobs: int, **options
    ) -> None:
        if jobs < 1:
            raise CommandError("--jobs is a number of worker processes: 1 or more")
        ws = _workspace(workspace)
        try:
            files = sources.expand(paths)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        # A bar only for a person watching: never in a pipe, a log or a test's captured output.
        bar = tqdm(total=sum(f.stat().st_size for f in files), unit="B", unit_scale=True, file=sys.stderr,
                   disable=not sys.stdout.isatty(), desc="importing")  # fmt: skip

        def progress(size: int, summary: loading.Summary) -> None:
            bar.update(size)
            bar.set_postfix(sessions=summary.imported + summary.skipped, refused=len(summary.refused), refresh=False)

        with bar:
            if jobs == 1:
                summary = loading.load(
                    workspace=ws, items=sources.items(files), emit_events=emit_events, progress=progress
                )
            else:
                summary = parallel.load_parallel(
                    workspace=ws, raws=sources.raw_items(files), jobs=jobs, emit_events=emit_events, progress=progress
                )
        for where, why in summary.refused:
            self.stderr.write(f"{where}: {why}")
        self.stdout.write(summary.line())
        if summary.refused:
            raise CommandError(f"{len(summary.refused)} record(s) refused, listed above; the rest is loaded")


def _workspace(slug: str | None) -> Workspace:
    if slug is not None:
        ws = Workspace.objects.filter(slug=slug).first()
        if ws is None:
            raise CommandError(f"no workspace {slug!r}: create it first (create_workspace {slug})")
        return ws
    only = list(Workspace.objects.all()[:2])
    if len(only) != 1:
        raise CommandError("name the workspace to import into with --workspace SLUG")
    return only[0]
