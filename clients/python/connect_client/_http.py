"""Sending requests: configuration, authentication, error mapping, and the one retry rule.

Retries: only idempotent requests are retried — reads (GET), and writes that carry an
`Idempotency-Key` (the ingest API's: the server answers a repeat with the first answer) — and
only on `429 rate_limited`, on a `503` and on a connection error. The wait is the server's:
`Retry-After` (seconds or an HTTP-date), else on a 429 `RateLimit-Reset` (seconds until its
window ends), else a jittered exponential backoff; all within a bounded budget (`max_retries`
retries and `max_retry_wait` seconds of waiting in all). A wait the budget cannot afford is not
started: the error is raised at once with its `retry_after`. Nothing else is retried.

A `304 Not Modified` is an answer, not an error, when the request was conditional (it sent
`If-None-Match`): the caller (`_response.Exchange`) answers it from its cache.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from . import errors

USER_AGENT = "connect-client-python/0.2.0"
IDEMPOTENT = frozenset({"GET", "HEAD"})
IDEMPOTENCY_KEY = "Idempotency-Key"
ENV_API_KEY = "CONNECT_API_KEY"
ENV_BASE_URL = "CONNECT_BASE_URL"


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    max_retry_wait: float = 30.0  # seconds of waiting, in all, for one call
    base_delay: float = 0.5
    max_delay: float = 8.0

    def backoff(self, attempt: int) -> float:
        """Exponential with equal jitter: half the delay fixed, half random."""
        delay = min(self.max_delay, self.base_delay * float(2**attempt))
        return delay / 2 + random.uniform(0, delay / 2)


NO_RETRIES = RetryPolicy(max_retries=0)


def base_url_from(base_url: str | None) -> str:
    """`base_url`, else `CONNECT_BASE_URL`; a `ConfigurationError` saying both ways when neither."""
    url = base_url if base_url is not None else os.environ.get(ENV_BASE_URL) or None
    if not url:
        raise errors.ConfigurationError(
            f"no base URL: pass it (Connect('https://connect.example.com', …)) or set {ENV_BASE_URL}")
    return url.rstrip("/")


def credential_headers(api_key: str | None, token: str | None, ingest_key: str | None = None) -> dict[str, str]:
    """The one credential passed, else `CONNECT_API_KEY`; a `ConfigurationError` otherwise."""
    given = [c for c in (api_key, token, ingest_key) if c is not None]
    if len(given) > 1:
        raise errors.ConfigurationError("pass exactly one of api_key=, token= or ingest_key=, not several")
    if not given:
        from_env = os.environ.get(ENV_API_KEY)
        if not from_env:
            raise errors.ConfigurationError(
                f"no credential: pass api_key= (or token=, ingest_key=) or set {ENV_API_KEY}")
        given = [from_env]
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
    code = body.get("error") if isinstance(body, dict) else None
    return code if isinstance(code, str) else None


class _Budget:
    """One call's retries: how long to wait before the next attempt, or the error to raise."""

    def __init__(self, method: str, policy: RetryPolicy, headers: Mapping[str, str] | None = None) -> None:
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
        delay = self.wait_for(errors.wait_seconds(response))
        if delay is None:
            raise errors.from_response(response)
        return delay


def _answered(response: httpx.Response, headers: Mapping[str, str] | None) -> bool:
    return response.is_success or (response.status_code == 304 and "If-None-Match" in (headers or {}))


class _Transport:
    """What the sync and async transports share; each only sends and sleeps its own way."""

    def __init__(self, base_url: str, headers: dict[str, str], *, retry: RetryPolicy) -> None:
        self.base_url = base_url
        self.retry = retry
        self.headers = headers

    def _arguments(self, params: Any, json: Any, headers: Mapping[str, str] | None) -> dict[str, Any]:
        return {"params": params, "json": json, "headers": {**self.headers, **(headers or {})}}


class SyncTransport(_Transport):
    def __init__(self, base_url: str, headers: dict[str, str], *, timeout: float, retry: RetryPolicy,
                 http: httpx.Client | None = None) -> None:
        super().__init__(base_url, headers, retry=retry)
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self._owns_http = http is None

    def request(self, method: str, path: str, *, params: Any = None, json: Any = None,
                headers: Mapping[str, str] | None = None) -> httpx.Response:
        budget = _Budget(method, self.retry, headers)
        while True:
            try:
                response = self.http.request(method, path, **self._arguments(params, json, headers))
            except httpx.TransportError as error:
                delay = budget.after_error(error)
            else:
                if _answered(response, headers):
                    return response
                delay = budget.after(response)
            time.sleep(delay)

    def close(self) -> None:
        if self._owns_http:
            self.http.close()


class AsyncTransport(_Transport):
    def __init__(self, base_url: str, headers: dict[str, str], *, timeout: float, retry: RetryPolicy,
                 http: httpx.AsyncClient | None = None) -> None:
        super().__init__(base_url, headers, retry=retry)
        self.http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self._owns_http = http is None

    async def request(self, method: str, path: str, *, params: Any = None, json: Any = None,
                      headers: Mapping[str, str] | None = None) -> httpx.Response:
        budget = _Budget(method, self.retry, headers)
        while True:
            try:
                response = await self.http.request(method, path, **self._arguments(params, json, headers))
            except httpx.TransportError as error:
                delay = budget.after_error(error)
            else:
                if _answered(response, headers):
                    return response
                delay = budget.after(response)
            await asyncio.sleep(delay)

    async def close(self) -> None:
        if self._owns_http:
            await self.http.aclose()
