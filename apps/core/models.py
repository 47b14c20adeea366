from django.db import models


class RateLimitCounter(models.Model):
    """Requests counted in one fixed window for one bucket (a credential or a workspace), where
    there is no Redis (apps/access/ratelimit/database_store.py). Rows of past windows are
    deleted as new windows start."""

    bucket = models.CharField(max_length=200)
    window_start = models.BigIntegerField(help_text="Unix seconds at which the window began")
    hits = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["bucket", "window_start"], name="ratelimit_bucket_window")]

    def __str__(self) -> str:
        return f"{self.bucket}@{self.window_start}: {self.hits}"
