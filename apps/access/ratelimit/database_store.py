"""Counters in the database's `RateLimitCounter` table: one row per bucket and window, shared
by every process on that database. A hit is one upsert of all buckets (`INSERT … ON CONFLICT
… RETURNING`, which PostgreSQL and SQLite both speak); rows of windows before the previous one
are deleted once per window per process. A refund never takes a row below zero."""

from __future__ import annotations

from django.db import connection, models

from apps.core.models import RateLimitCounter


class DatabaseCounters:
    def __init__(self) -> None:
        self.pruned_before = 0  # windows older than this were already deleted by this process

    def add(self, names: list[str], start: int, window: int, hits: int = 1) -> list[int]:
        table = connection.ops.quote_name(RateLimitCounter._meta.db_table)
        values = ", ".join(["(%s, %s, %s)"] * len(names))
        params: list = []
        for name in names:
            params += [name, start, hits]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (bucket, window_start, hits) VALUES {values} "  # noqa: S608 - names are ours
                f"ON CONFLICT (bucket, window_start) DO UPDATE SET hits = {table}.hits + excluded.hits "
                "RETURNING bucket, hits",
                params,
            )
            counted = dict(cursor.fetchall())
        if self.pruned_before < start:
            self.pruned_before = start
            RateLimitCounter.objects.filter(window_start__lt=start - window).delete()
        return [counted[name] for name in names]

    def refund(self, names: list[str], start: int, window: int) -> None:  # noqa: ARG002
        RateLimitCounter.objects.filter(bucket__in=names, window_start=start, hits__gt=0).update(
            hits=models.F("hits") - 1
        )
