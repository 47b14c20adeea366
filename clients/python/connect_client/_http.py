"""Sending requests: authentication, error mapping, and the one retry rule.

Retries: only idempotent reads (GET) are retried, and only on `429 rate_limited`, on a `503`
and on a connection error, waiting `Retry-After` when the server sent one (else a jittered
exponential backoff), within a bounded budget (`max_retries` retries and `max_retry_wait`
seconds of waiting in all). A wait the budget cannot afford is not started: the error is
raised at once with its `retry_after`. Nothing else is retried.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx

from . import errors

USER_AGENT = "connect-client-python/0.1.0"
IDEMPOTENT = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    max_retry_wait: float = 30.0  # seconds of waiting, in all, for one call
    base_delay: float = 0.5
    max_delay: float = 8.0

    def backoff(self, attempt: int) -> float:
        """Exponential with equal jitter: half the delay fixed, half random."""
        delay = min(self.max_delay, self.base_delay * 2**attempt)
        return delay / 2 + random.uniform(0, delay / 2)


NO_RETRIES = RetryPolicy(max_retries=0)


def credential_headers(api_key: str | None, token: str | None) -> dict[str, str]:
    if (api_key is None) == (token is None):
        raise ValueError("pass exactly one of api_key= or token=")
    return {"Authorization": f"Bearer {api_key or token}", "User-Agent": USER_AGENT}


def _retryable(response: httpx.Response) -> bool:
    if response.status_code == 503:
        return True
    if response.status_code == 429:
        # connection_limit is the stream's own (its reconnect loop handles it); rate_limited is
        # the request budget, which the server says when to retry.
        return response.headers.get("content-type", "").startswith("application/json") and \
            _code(response) == "rate_limited"
    return False


def _code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("error") if isinstance(body, dict) else None


class _Budget:
    """How long to wait before retry number `attempt`, or None when the budget is spent."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.waited = 0.0

    def wait_for(self, attempt: int, retry_after: float | None) -> float | None:
        if attempt >= self.policy.max_retries:
            return None
        delay = retry_after if retry_after is not None else self.policy.backoff(attempt)
        if self.waited + delay > self.policy.max_retry_wait:
            return None
        self.waited += delay
        return delay


class SyncTransport:
    def __init__(self, base_url: str, headers: dict[str, str], *, timeout: float, retry: RetryPolicy,
                 http: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry
        self.http = http or httpx.Client(base_url=self.base_url, timeout=timeout)
        self.headers = headers
        self._owns_http = http is None

    def request(self, method: str, path: str, *, params: Any = None, json: Any = None,
                headers: dict[str, str] | None = None) -> httpx.Response:
        budget = _Budget(self.retry if method in IDEMPOTENT else NO_RETRIES)
        attempt = 0
        while True:
            try:
                response = self.http.request(method, path, params=params, json=json,
                                             headers={**self.headers, **(headers or {})})
            except httpx.TransportError:
                delay = budget.wait_for(attempt, None)
                if delay is None:
                    raise
            else:
                if response.is_success:
                    return response
                if not _retryable(response) or (delay := budget.wait_for(
                        attempt, errors.retry_after_seconds(response.headers.get("Retry-After")))) is None:
                    raise errors.from_response(response)
            time.sleep(delay)
            attempt += 1

    def close(self) -> None:
        if self._owns_http:
            self.http.close()


class AsyncTransport:
    def __init__(self, base_url: str, headers: dict[str, str], *, timeout: float, retry: RetryPolicy,
                 http: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry
        self.http = http or httpx.AsyncClient(base_url=self.base_url, timeout=timeout)
        self.headers = headers
        self._owns_http = http is None

    async def request(self, method: str, path: str, *, params: Any = None, json: Any = None,
                      headers: dict[str, str] | None = None) -> httpx.Response:
        budget = _Budget(self.retry if method in IDEMPOTENT else NO_RETRIES)
        attempt = 0
        while True:
            try:
                response = await self.http.request(method, path, params=params, json=json,
                                                   headers={**self.headers, **(headers or {})})
            except httpx.TransportError:
                delay = budget.wait_for(attempt, None)
                if delay is None:
                    raise
            else:
                if response.is_success:
                    return response
                if not _retryable(response) or (delay := budget.wait_for(
                        attempt, errors.retry_after_seconds(response.headers.get("Retry-After")))) is None:
                    raise errors.from_response(response)
            await asyncio.sleep(delay)
            attempt += 1

    async def close(self) -> None:
        if self._owns_http:
            await self.http.aclose()
