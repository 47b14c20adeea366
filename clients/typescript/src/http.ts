/**
 * Sending requests: configuration, authentication, timeouts, error mapping, the one retry rule
 * and the conditional-GET cache.
 *
 * Retries: only idempotent requests are retried — reads (GET), and writes that carry an
 * `Idempotency-Key` (the server answers a repeat with the first answer) — and only on
 * `429 rate_limited`, on a `503` and on a connection error or timeout. The wait is the server's:
 * `Retry-After` (seconds or an HTTP-date), else on a 429 `RateLimit-Reset`, else a jittered
 * exponential backoff; all within a bounded budget (`maxRetries` retries and `maxRetryWaitMs`
 * of waiting in all). A wait the budget cannot afford is not started: the error is thrown at
 * once with its `retryAfter`. Nothing else is retried.
 *
 * The cache: a GET whose `200` carried an `ETag` keeps the body it was read from, keyed by path and
 * query, in memory on the client (so per credential). The next same GET sends `If-None-Match`;
 * a `304` is answered from the kept body (`fromCache`), read again so that no two calls share
 * one mutable object. Bounded by the bytes of the
 * bodies it was read from, least recently used out first; `etagCacheBytes: 0` turns it off.
 */
import { APIConnectionError, APITimeoutError, ConfigurationError, errorFromResponse, waitSeconds } from "./errors.js";

export const VERSION = "0.1.0";
export const USER_AGENT = `connect-client-typescript/${VERSION}`;
export const ENV_API_KEY = "CONNECT_API_KEY";
export const ENV_BASE_URL = "CONNECT_BASE_URL";
const IDEMPOTENCY_KEY = "idempotency-key";

export interface RetryPolicy {
  maxRetries: number;
  /** Milliseconds of waiting, in all, for one call. */
  maxRetryWaitMs: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 3, maxRetryWaitMs: 30_000, baseDelayMs: 500, maxDelayMs: 8_000 };
export const DEFAULT_CACHE_BYTES = 8 * 1024 * 1024;

/** Exponential with equal jitter: half the delay fixed, half random. */
export function backoff(attempt: number, baseMs: number, maxMs: number): number {
  const delay = Math.min(maxMs, baseMs * 2 ** attempt);
  return delay / 2 + Math.random() * (delay / 2);
}

function env(name: string): string | undefined {
  const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
  return value ? value : undefined;
}

/** `baseUrl`, else `CONNECT_BASE_URL`; a `ConfigurationError` saying both ways when neither. */
export function baseUrlFrom(baseUrl: string | undefined): string {
  const url = baseUrl ?? env(ENV_BASE_URL);
  if (!url) {
    throw new ConfigurationError(`no base URL: pass it (new Connect({ baseUrl: "https://connect.example.com" })) or set ${ENV_BASE_URL}`);
  }
  return url.replace(/\/+$/, "");
}

/** The one credential passed, else `CONNECT_API_KEY`; a `ConfigurationError` otherwise. */
export function credentialFrom(apiKey?: string, token?: string, ingestKey?: string): string {
  const given = [apiKey, token, ingestKey].filter((c): c is string => c !== undefined);
  if (given.length > 1) throw new ConfigurationError("pass exactly one of apiKey, token or ingestKey, not several");
  const credential = given[0] ?? env(ENV_API_KEY);
  if (!credential) throw new ConfigurationError(`no credential: pass apiKey (or token, ingestKey) or set ${ENV_API_KEY}`);
  return credential;
}

export type QueryValue = string | number | boolean | null | undefined | readonly string[];

/** One API call: where it goes, what it carries, and how its answer becomes a `T`. */
export interface Request<T> {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  parse: (text: string, response: Response) => T;
  query?: Record<string, QueryValue>;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Per call: an `AbortSignal` (ends the call and its retries), extra headers, a timeout for each attempt. */
export interface RequestOptions {
  signal?: AbortSignal;
  headers?: Record<string, string>;
  timeout?: number;
}

/** An answer: what `.withRawResponse` gives. After a `304`, `status` is 304 and `parse()` is the cached value. */
export class APIResponse<T> {
  constructor(readonly response: Response, private readonly value: T, readonly fromCache = false) {}
  get status(): number { return this.response.status; }
  get headers(): Headers { return this.response.headers; }
  get requestId(): string | null { return this.response.headers.get("X-Request-Id"); }
  get etag(): string | null { return this.response.headers.get("ETag"); }
  parse(): T { return this.value; }
}

export function queryString(query: Record<string, QueryValue> | undefined): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (value === null || value === undefined) continue;
    params.append(name, Array.isArray(value) ? value.join(",") : String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

interface Entry { etag: string; text: string; size: number }

/** Path and query → (ETag, body text), least recently used out first, bounded by the answers' body bytes. */
export class ETagCache {
  bytes = 0;
  private readonly entries = new Map<string, Entry>();
  constructor(readonly maxBytes: number = DEFAULT_CACHE_BYTES) {}
  get size(): number { return this.entries.size; }
  get(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    if (entry) { this.entries.delete(key); this.entries.set(key, entry); }
    return entry;
  }
  put(key: string, entry: Entry): void {
    this.discard(key);
    if (entry.size > this.maxBytes) return;
    this.entries.set(key, entry);
    this.bytes += entry.size;
    for (const [oldest, dropped] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= dropped.size;
    }
  }
  discard(key: string): void {
    const old = this.entries.get(key);
    if (old) { this.entries.delete(key); this.bytes -= old.size; }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) { reject(signal.reason); return; }
    const timer = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(timer); reject(signal?.reason); };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
export { sleep };

function retryable(response: Response, text: string): boolean {
  if (response.status === 503) return true;
  if (response.status !== 429) return false;
  // connection_limit is the stream's own (its reconnect loop handles it); rate_limited is the
  // request budget, which the server says when to retry.
  try { return (JSON.parse(text) as { error?: unknown }).error === "rate_limited"; } catch { return false; }
}

export interface TransportOptions {
  baseUrl: string;
  credential: string;
  timeout: number;
  retry: RetryPolicy;
  fetch: typeof fetch;
  etagCacheBytes: number;
  headers?: Record<string, string>;
}

export class Transport {
  readonly cache: ETagCache;
  readonly headers: Record<string, string>;
  constructor(readonly options: TransportOptions) {
    this.cache = new ETagCache(options.etagCacheBytes);
    this.headers = { Authorization: `Bearer ${options.credential}`, "User-Agent": USER_AGENT, ...options.headers };
  }

  get baseUrl(): string { return this.options.baseUrl; }

  /** One attempt: the answer and its body text; a connection error or timeout as `APIConnectionError`. */
  async send(method: string, url: string, init: { headers: Record<string, string>; body?: string | undefined },
             options: RequestOptions = {}): Promise<{ response: Response; text: string }> {
    const timeout = AbortSignal.timeout(options.timeout ?? this.options.timeout);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    try {
      const response = await this.options.fetch(url, { method, headers: init.headers, body: init.body ?? null, signal, redirect: "manual" });
      return { response, text: await response.text() };
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (timeout.aborted) throw new APITimeoutError(`${method} ${url}: no answer within ${options.timeout ?? this.options.timeout} ms`, { cause: error });
      throw new APIConnectionError(`${method} ${url}: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Sends with the retry rule; resolves with the successful (or conditional 304) answer, rejects with its error. */
  async request(method: string, path: string, query: Record<string, QueryValue> | undefined, body: unknown,
                headers: Record<string, string>, options: RequestOptions = {}): Promise<{ response: Response; text: string }> {
    const all: Record<string, string> = { ...this.headers, ...headers, ...options.headers };
    if (body !== undefined) all["Content-Type"] = "application/json";
    const url = this.baseUrl + path + queryString(query);
    const safe = method === "GET" || method === "HEAD" || Object.keys(all).some((h) => h.toLowerCase() === IDEMPOTENCY_KEY);
    const policy = safe ? this.options.retry : { ...this.options.retry, maxRetries: 0 };
    let attempt = 0;
    let waited = 0;
    const waitFor = (retryAfterMs: number | null): number | null => {
      if (attempt >= policy.maxRetries) return null;
      const delay = retryAfterMs ?? backoff(attempt, policy.baseDelayMs, policy.maxDelayMs);
      if (waited + delay > policy.maxRetryWaitMs) return null;
      waited += delay;
      attempt += 1;
      return delay;
    };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    for (;;) {
      let delay: number | null;
      try {
        const answer = await this.send(method, url, { headers: all, body: payload }, options);
        const { response, text } = answer;
        if (response.ok || (response.status === 304 && "If-None-Match" in all)) return answer;
        const error = errorFromResponse(response, text);
        if (!retryable(response, text)) throw error;
        const seconds = waitSeconds(response);
        delay = waitFor(seconds === null ? null : seconds * 1000);
        if (delay === null) throw error;
      } catch (error) {
        if (!(error instanceof APIConnectionError)) throw error;
        delay = waitFor(null);
        if (delay === null) throw error;
      }
      await sleep(delay, options.signal);
    }
  }

  /** A request through the cache: conditional when a value is kept, kept when the answer has an ETag. */
  async exchange<T>(request: Request<T>, options: RequestOptions = {}): Promise<APIResponse<T>> {
    const headers: Record<string, string> = { ...request.headers };
    const key = request.path + queryString(request.query);
    const cached = request.method === "GET" && this.cache.maxBytes > 0 ? this.cache.get(key) : undefined;
    if (cached) headers["If-None-Match"] = cached.etag;
    const { response, text } = await this.request(request.method, request.path, request.query, request.body, headers, options);
    if (response.status === 304 && cached) {
      this.cache.put(key, { ...cached, etag: response.headers.get("ETag") ?? cached.etag });
      return new APIResponse(response, request.parse(cached.text, response), true);
    }
    const value = request.parse(text, response);
    const etag = response.headers.get("ETag");
    if (request.method === "GET" && etag && this.cache.maxBytes > 0) {
      this.cache.put(key, { etag, text, size: new TextEncoder().encode(text).byteLength });
    } else if (cached) {
      this.cache.discard(key);
    }
    return new APIResponse(response, value);
  }
}
