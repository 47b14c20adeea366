"""Sending requests: authentication, error mapping, and the one retry rule.

Retries: only idempotent requests are retried — reads (GET), and writes that carry an
`Idempotency-Key` (the ingest API's: the server answers a repeat with the first answer) — and
only on `429 rate_limited`, on a `503` and on a connection error, waiting `Retry-After` when the server sent one (else a jittered
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
IDEMPOTENCY_KEY = "Idempotency-Key"


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


def credential_headers(api_key: str | None, token: str | None, ingest_key: str | None = None) -> dict[str, str]:
    given = [c for c in (api_key, token, ingest_key) if c is not None]
    if len(given) != 1:
        raise ValueError("pass exactly one of api_key=, token= or ingest_key=")
    return {"Authorization": f"Bearer {given[0]}", "User-Agent": USER_AGENT}


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
    """One call's retries: how long to wait before the next attempt, or the error to raise."""

    def __init__(self, method: str, policy: RetryPolicy, headers: dict[str, str] | None = None) -> None:
        safe = method in IDEMPOTENT or IDEMPOTENCY_KEY in (headers or {})
        self.policy = policy if safe else NO_RETRIES
        self.attempt = 0
        self.waited = 0.0

    def wait_for(self, retry_after: float | None) -> float | None:
        if self.attempt >= self.policy.max_retries:
            return None
        delay = retry_after if retry_after is not None else self.policy.backoff(self.attempt)
        if self.waited + delay > self.policy.max_retry_wait:
            return None
        self.waited += delay
        self.attempt += 1
        return delay

    def after_error(self, error: httpx.TransportError) -> float:
        """The wait before retrying after a connection error; the error itself when spent."""
        delay = self.wait_for(None)
        if delay is None:
            raise error
        return delay

    def after(self, response: httpx.Response) -> float:
        """The wait before retrying after an unsuccessful answer; its error when it cannot."""
        if not _retryable(response):
            raise errors.from_response(response)
        delay = self.wait_for(errors.retry_after_seconds(response.headers.get("Retry-After")))
        if delay is None:
            raise errors.from_response(response)
        return delay


class _Transport:
    """What the sync and async transports share; each only sends and sleeps its own way."""

    def __init__(self, base_url: str, headers: dict[str, str], *, retry: RetryPolicy, http: Any) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry
        self.http = http
        self.headers = headers

    def _arguments(self, params: Any, json: Any, headers: dict[str, str] | None) -> dict[str, Any]:
        return {"params": params, "json": json, "headers": {**self.headers, **(headers or {})}}


class SyncTransport(_Transport):
    def __init__(self, base_url: str, headers: dict[str, str], *, timeout: float, retry: RetryPolicy,
                 http: httpx.Client | None = None) -> None:
        super().__init__(base_url, headers, retry=retry,
                         http=http or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout))
        self._owns_http = http is None

    def request(self, method: str, path: str, *, params: Any = None, json: Any = None,
                headers: dict[str, str] | None = None) -> httpx.Response:
        budget = _Budget(method, self.retry, headers)
        while True:
            try:
                response = self.http.request(method, path, **self._arguments(params, json, headers))
            except httpx.TransportError as error:
                delay = budget.after_error(error)
            else:
                if response.is_success:
                    return response
                delay = budget.after(response)
            time.sleep(delay)

    def close(self) -> None:
        if self._owns_http:
            self.http.close()


class AsyncTransport(_Transport):
    def __init__(self, base_url: str, headers: dict[str, str], *, timeout: float, retry: RetryPolicy,
                 http: httpx.AsyncClient | None = None) -> None:
        super().__init__(base_url, headers, retry=retry,
                         http=http or httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout))
        self._owns_http = http is None

    async def request(self, method: str, path: str, *, params: Any = None, json: Any = None,
                      headers: dict[str, str] | None = None) -> httpx.Response:
        budget = _Budget(method, self.retry, headers)
        while True:
            try:
                response = await self.http.request(method, path, **self._arguments(params, json, headers))
            except httpx.TransportError as error:
                delay = budget.after_error(error)
            else:
                if response.is_success:
                    return response
                delay = budget.after(response)
            await asyncio.sleep(delay)

    async def close(self) -> None:
        if self._owns_http:
            await self.http.aclose()
