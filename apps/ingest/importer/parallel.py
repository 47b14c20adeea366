"""Loading with worker processes (`import_recordings --jobs N`): the same outcome as one process.

One reader (this process) hands chunks of raw records to N forked workers; each decodes, checks
and writes its chunk as `loading.load_chunk` does, one session per transaction on a connection
of its own. On PostgreSQL most of a load is the database's own work (the search index's
triggers), which runs in each connection's server process, so N workers keep N cores busy;
SQLite has one writer at a time, so more jobs gain little there.

Invariants, the single-process loader's kept: whole sessions only (a stopped worker loses its
open transaction and no more; an interrupted parent stops every worker; a re-run skips what was
loaded); the outcome of the file order (a record whose `externalId` already appeared in the run
is held back and loaded after the workers finish, in order, never raced against the first);
refusals listed in input order; the search statistics refreshed once, at the end.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator
from itertools import islice

from apps.ingest.importer import loading, sources
from apps.ingest.importer.loading import Summary
from apps.ingest.importer.sources import RawItem
from apps.recordings import services
from apps.recordings.management.commands.seed_demo import close_connections_before_fork
from apps.tenancy.models import Workspace

TASK = 8  # records a worker takes at a time: small, so workers stay evenly busy to the end

_workspaces: dict[str, Workspace] = {}  # per worker process


def load_parallel(
    *,
    workspace: Workspace,
    raws: Iterable[RawItem],
    jobs: int,
    emit_events: bool = False,
    progress: Callable[[int, Summary], None] | None = None,
) -> Summary:
    summary = Summary()
    refused: list[tuple[int, str, str]] = []  # (input index, where, why), sorted at the end
    held_back: list[tuple[int, RawItem]] = []
    tasks = _tasks(workspace.pk, emit_events, raws, held_back)
    close_connections_before_fork()
    pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_ignore_interrupts)
    try:
        for done, size, task_refused in pool.imap(_load_task, tasks):
            _add(summary, done)
            refused += task_refused
            summary.refused += [(where, why) for _, where, why in task_refused]  # for the bar's count
            if progress:
                progress(size, summary)
    except BaseException:
        pool.terminate()  # stop the other workers too: each loses its open transaction only
        raise
    finally:
        pool.close()
        pool.join()
    # Records whose externalId came earlier in the run, in order, against what is now stored.
    for index, raw in held_back:
        part = Summary()
        loading.load_chunk(workspace, [sources.parse(raw)], part, emit_events=emit_events)
        _add(summary, part)
        refused += [(index, where, why) for where, why in part.refused]
        if progress:
            progress(raw.size, summary)
    summary.refused = [(where, why) for _, where, why in sorted(refused, key=lambda r: r[0])]
    if summary.imported:
        services.refresh_statistics()
    return summary


def _ignore_interrupts() -> None:
    """A worker leaves Ctrl-C to the parent, which stops every worker at once (`terminate`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _tasks(
    workspace_id: str, emit_events: bool, raws: Iterable[RawItem], held_back: list[tuple[int, RawItem]]
) -> Iterator[tuple[str, bool, list[tuple[int, RawItem]]]]:
    """Chunks of (input index, raw record) for the workers; a record whose externalId came
    earlier goes to `held_back` instead. Runs in the pool's task thread, read as workers ask."""
    seen: set[str] = set()

    def first_occurrences() -> Iterator[tuple[int, RawItem]]:
        for index, raw in enumerate(raws):
            key = sources.external_id(raw)
            if key is not None and key in seen:
                held_back.append((index, raw))
            else:
                if key is not None:
                    seen.add(key)
                yield index, raw

    numbered = first_occurrences()
    while chunk := list(islice(numbered, TASK)):
        yield workspace_id, emit_events, chunk


def _load_task(task: tuple[str, bool, list[tuple[int, RawItem]]]) -> tuple[Summary, int, list[tuple[int, str, str]]]:
    """In a worker: one chunk loaded as the single-process loader loads it."""
    workspace_id, emit_events, chunk = task
    workspace = _workspaces.get(workspace_id)
    if workspace is None:
        workspace = _workspaces[workspace_id] = Workspace.objects.get(pk=workspace_id)
    items = [sources.parse(raw) for _, raw in chunk]
    done = Summary()
    loading.load_chunk(workspace, items, done, emit_events=emit_events)
    # Each item adds at most one refusal, in item order: number them with the items' indexes.
    refused, pending = [], iter(done.refused)
    following = next(pending, None)
    for (index, _), item in zip(chunk, items, strict=True):
        if following is not None and following[0] == item.where:
            refused.append((index, *following))
            following = next(pending, None)
    done.refused = []
    return done, sum(item.size for item in items), refused


def _add(summary: Summary, part: Summary) -> None:
    summary.imported += part.imported
    summary.segments += part.segments
    summary.skipped += part.skipped
