"""`serve [--host H] [--port P] [--workers N]`: N daphne processes listening on one port
(processes and sockets: engine/serve.py).

Beside daphne it runs the task side (unless `--no-tasks`), started once the servers serve: the
django-q2 cluster (`qcluster`; ORM broker by default, Redis when REDIS_URL is set) and the
webhook sweeper, which re-queues due retries and expired leases every
CONNECT_WEBHOOK_SWEEP_SECONDS. On other machines, `manage.py qcluster` runs workers alone.

Metrics (apps/core/metrics.py): every process of this `serve` writes its Prometheus values to
one multiprocess directory, PROMETHEUS_MULTIPROC_DIR when set (it then belongs to this `serve`),
else a temporary one removed at exit. Its files are removed at start, so a restart of `serve`
starts from zero and never adds a previous run's counts; a child that dies keeps its counter
files (what it counted stays counted, once: the new child writes files of its own pid) and loses
its live gauges (`mark_process_dead`).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.core.logs import configure, logging_config
from engine.serve import daphne_command, listening_sockets, supervise

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Serve the ASGI app with N daphne processes listening on one port."
    # This process only reads settings and supervises: each child sets Django up and the servers
    # run no checks either. manage.py runs `serve` without django.setup() (its docstring).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
        parser.add_argument("--access-log", action="store_true", help="log every request to stdout")
        parser.add_argument("--no-tasks", action="store_true", help="do not start the django-q2 cluster and sweeper")

    def handle(
        self, *args, host: str, port: int, workers: int, access_log: bool, no_tasks: bool = False, **options
    ) -> None:
        # Django's own set-up is skipped here: this process's lines take the servers' format.
        configure(logging_config(settings.CONNECT_LOG_FORMAT, settings.LOGGING["root"]["level"], encoder="json"))
        workers = max(1, workers)
        sockets = listening_sockets(host, port, workers)
        app = settings.ASGI_APPLICATION.replace(".application", ":application")
        servers = [daphne_command(app, sock.fileno(), access_log=access_log) for sock in sockets]
        tasks = []
        if not no_tasks:
            django = [sys.executable, "-m", "django"]  # DJANGO_SETTINGS_MODULE is inherited
            sweep_every = str(settings.CONNECT_WEBHOOK_SWEEP_SECONDS)
            tasks = [django + ["qcluster"], django + ["sweep_webhook_deliveries", "--every", sweep_every]]
        logger.info(
            "Serving on http://%s:%d with %d daphne process(es)%s",
            host, port, workers, "" if no_tasks else " and the task cluster",
        )
        metrics_dir, owned = metrics_directory()
        try:
            supervise(
                servers, sockets, tasks,
                on_exit=lambda pid: process_dead(pid, metrics_dir),
                liveness_seconds=settings.CONNECT_SERVE_LIVENESS_SECONDS,
            )
        finally:
            if owned:
                shutil.rmtree(metrics_dir, ignore_errors=True)


def metrics_directory() -> tuple[Path, bool]:
    """The multiprocess directory the children inherit, emptied; True when made here (removed
    at exit). Set before any child starts: prometheus-client reads it when first imported."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
    else:
        path = Path(tempfile.mkdtemp(prefix="connect-metrics-"))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path, not given


def process_dead(pid: int, metrics_dir: Path) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, str(metrics_dir))
