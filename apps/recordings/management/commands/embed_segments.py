"""`manage.py embed_segments`: vectors for every segment that has none of the current model
(existing data, a model change, a missed task), with a progress bar. Resumable: stopped at any
point, a rerun skips what is done (docs/decisions/semantic-search.md)."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from apps.tenancy.models import Workspace

READ = 512  # segments read per step


class Command(BaseCommand):
    help = "Embed the segments that have no vector of the current model (search by meaning); resumable."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--workspace", help="only this workspace (its slug)")
        parser.add_argument("--limit", type=int, default=None, help="stop after embedding this many segments")

    def handle(self, *args, workspace: str | None = None, limit: int | None = None, **options) -> None:
        from apps.recordings.semantic import HOW_TO_TURN_ON, enabled

        if not enabled():
            raise CommandError(f"embed_segments needs {HOW_TO_TURN_ON}")
        from apps.recordings.semantic.embedders import current
        from apps.recordings.semantic.writer import count_pending, embed, pending_after

        workspace_id = None
        if workspace:
            try:
                workspace_id = Workspace.objects.get(slug=workspace).id
            except Workspace.DoesNotExist:
                raise CommandError(f"no workspace with slug {workspace!r}") from None
        embedder = current()
        total = count_pending(embedder.name, workspace_id)
        if limit is not None:
            total = min(total, limit)
        done, after = 0, ""
        with tqdm(total=total, unit="segment", file=sys.stderr, disable=None if options["verbosity"] else True) as bar:
            while limit is None or done < limit:
                pending, after = pending_after(after, embedder.name, READ, workspace_id)
                if after is None:
                    break
                if limit is not None:
                    pending = pending[: limit - done]
                written = embed(pending, embedder)
                done += written
                bar.update(written)
        self.stdout.write(f"embedded {done} segments with {embedder.name}")
