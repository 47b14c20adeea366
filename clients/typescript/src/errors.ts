/**
 * One error class per wire error code (the `error` field of every JSON error body).
 *
 * Every API error is a `ConnectError` carrying the HTTP `status`, the wire `code`, the
 * response's `requestId` (`X-Request-Id`), `retryAfter` (seconds the server asked to wait) and
 * `detail`; `body` is the decoded body as received, fields this version does not know too.
 * `errorFromResponse` picks the class by code; a code this version does not know is still a
 * `ConnectError` (by status class: `ClientError` for 4xx, `ServerError` for 5xx), never a crash.
 */

/** The client was built without what it needs (a base URL, one credential), or with too much. */
export class ConfigurationError extends Error {
  override name = "ConfigurationError";
}

/** The request never got an answer: the connection failed or was reset (after the retries). */
export class APIConnectionError extends Error {
  override name = "APIConnectionError";
}

/** No answer within the client's `timeout` (after the retries). */
export class APITimeoutError extends APIConnectionError {
  override name = "APITimeoutError";
}

export interface ErrorInit {
  status: number;
  code: string;
  body?: Record<string, unknown>;
  headers?: Headers;
  requestId?: string | null;
  retryAfter?: number | null;
}

/** An error answer from the API. */
export class ConnectError extends Error {
  static readonly status: number = 0;
  static readonly code: string = "";
  override name = "ConnectError";
  readonly status: number;
  readonly code: string;
  /** `X-Request-Id` of the answer (quote it when asking for help). */
  readonly requestId: string | null;
  /** Seconds the server asked to wait before trying again (`Retry-After`, else `RateLimit-Reset` on a 429). */
  readonly retryAfter: number | null;
  /** The decoded JSON body as received. */
  readonly body: Record<string, unknown>;
  readonly headers: Headers;

  constructor(init: ErrorInit, message?: string) {
    const body = init.body ?? { error: init.code };
    const detail = typeof body["detail"] === "string" ? (body["detail"] as string) : null;
    let text = message ?? `${init.status} ${init.code}${detail ? `: ${detail}` : ""}`;
    if (init.requestId) text += ` (request ${init.requestId})`;
    super(text);
    this.status = init.status;
    this.code = init.code;
    this.body = body;
    this.headers = init.headers ?? new Headers();
    this.requestId = init.requestId ?? null;
    this.retryAfter = init.retryAfter ?? null;
  }

  /** What was wrong and what to do (a 400's parameter, a 401's cause, …). */
  get detail(): string | null {
    const detail = this.body["detail"];
    return typeof detail === "string" ? detail : null;
  }
}

/** A 4xx whose code this client version does not know. */
export class ClientError extends ConnectError { override name = "ClientError"; }
/** A 5xx whose code this client version does not know. */
export class ServerError extends ConnectError { override name = "ServerError"; }

export class InvalidRequest extends ClientError {
  static override readonly status = 400; static override readonly code = "invalid_request"; override name = "InvalidRequest";
}
export class InvalidFilters extends ClientError {
  static override readonly status = 400; static override readonly code = "invalid_filters"; override name = "InvalidFilters";
}
/** A filter list over the cost budget: `cost`, `budget` and each entry's cost. */
export class FilterCostExceeded extends ClientError {
  static override readonly status = 400; static override readonly code = "filter_cost_exceeded"; override name = "FilterCostExceeded";
  get cost(): number | null { return typeof this.body["cost"] === "number" ? (this.body["cost"] as number) : null; }
  get budget(): number | null { return typeof this.body["budget"] === "number" ? (this.body["budget"] as number) : null; }
  get entries(): Array<Record<string, unknown>> {
    return Array.isArray(this.body["entries"]) ? (this.body["entries"] as Array<Record<string, unknown>>) : [];
  }
}
export class Unauthorized extends ClientError {
  static override readonly status = 401; static override readonly code = "unauthorized"; override name = "Unauthorized";
}
export class Forbidden extends ClientError {
  static override readonly status = 403; static override readonly code = "forbidden"; override name = "Forbidden";
}
/** `requiredScopes`: what the call needs, when the server names it. */
export class InsufficientScope extends ClientError {
  static override readonly status = 403; static override readonly code = "insufficient_scope"; override name = "InsufficientScope";
  get requiredScopes(): string[] {
    const scopes = this.body["requiredScopes"];
    return Array.isArray(scopes) ? scopes.filter((s): s is string => typeof s === "string") : [];
  }
}
export class NotFound extends ClientError {
  static override readonly status = 404; static override readonly code = "not_found"; override name = "NotFound";
}
export class WorkspaceNotFound extends ClientError {
  static override readonly status = 404; static override readonly code = "workspace_not_found"; override name = "WorkspaceNotFound";
}
export class MethodNotAllowed extends ClientError {
  static override readonly status = 405; static override readonly code = "method_not_allowed"; override name = "MethodNotAllowed";
}
export class NotAcceptable extends ClientError {
  static override readonly status = 406; static override readonly code = "not_acceptable"; override name = "NotAcceptable";
}
export class NotAllowed extends ClientError {
  static override readonly status = 409; static override readonly code = "not_allowed"; override name = "NotAllowed";
}
/** The request contradicts what is stored (`expectedSequence`: what an ingest append should send next). */
export class Conflict extends ClientError {
  static override readonly status = 409; static override readonly code = "conflict"; override name = "Conflict";
  get expectedSequence(): number | null {
    const expected = this.body["expectedSequence"];
    return typeof expected === "number" ? expected : null;
  }
}
/** The event log no longer reaches back to the `after` asked for: re-read the resources. */
export class ResyncRequired extends ClientError {
  static override readonly status = 410; static override readonly code = "resync_required"; override name = "ResyncRequired";
}
export class PayloadTooLarge extends ClientError {
  static override readonly status = 413; static override readonly code = "payload_too_large"; override name = "PayloadTooLarge";
}
export class UriTooLong extends ClientError {
  static override readonly status = 414; static override readonly code = "uri_too_long"; override name = "UriTooLong";
}
export class UnsupportedMediaType extends ClientError {
  static override readonly status = 415; static override readonly code = "unsupported_media_type"; override name = "UnsupportedMediaType";
}
export class IdempotencyKeyReused extends ClientError {
  static override readonly status = 422; static override readonly code = "idempotency_key_reused"; override name = "IdempotencyKeyReused";
}
/** The request budget is spent; `retryAfter` says when the window ends. */
export class RateLimited extends ClientError {
  static override readonly status = 429; static override readonly code = "rate_limited"; override name = "RateLimited";
}
/** Too many open event streams for the workspace. */
export class ConnectionLimit extends ClientError {
  static override readonly status = 429; static override readonly code = "connection_limit"; override name = "ConnectionLimit";
}
export class HeadersTooLarge extends ClientError {
  static override readonly status = 431; static override readonly code = "request_header_fields_too_large"; override name = "HeadersTooLarge";
}
export class InternalServerError extends ServerError {
  static override readonly status = 500; static override readonly code = "internal_server_error"; override name = "InternalServerError";
}
export class RequestTimeout extends ServerError {
  static override readonly status = 503; static override readonly code = "timeout"; override name = "RequestTimeout";
}
/** A dependency of the server is down; `retryAfter` says when to try again. */
export class Unavailable extends ServerError {
  static override readonly status = 503; static override readonly code = "unavailable"; override name = "Unavailable";
}

type ErrorClass = (new (init: ErrorInit, message?: string) => ConnectError) & { readonly code: string };

/** Wire code → class. */
export const BY_CODE: Readonly<Record<string, ErrorClass>> = Object.fromEntries(
  [
    InvalidRequest, InvalidFilters, FilterCostExceeded, Unauthorized, Forbidden, InsufficientScope, NotFound,
    WorkspaceNotFound, MethodNotAllowed, NotAcceptable, NotAllowed, Conflict, ResyncRequired, PayloadTooLarge,
    UriTooLong, UnsupportedMediaType, IdempotencyKeyReused, RateLimited, ConnectionLimit, HeadersTooLarge,
    InternalServerError, RequestTimeout, Unavailable,
  ].map((cls) => [cls.code, cls as ErrorClass]),
);

/** `Retry-After` as seconds from now: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); null when absent or unreadable. */
export function retryAfterSeconds(value: string | null, now: number = Date.now()): number | null {
  if (value === null || value.trim() === "") return null;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Math.max(0, Number(value));
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, (when - now) / 1000);
}

/** How long the server asked to wait: `Retry-After`, else on a 429 its `RateLimit-Reset`; null when neither. */
export function waitSeconds(response: Response): number | null {
  const retryAfter = retryAfterSeconds(response.headers.get("Retry-After"));
  if (retryAfter !== null || response.status !== 429) return retryAfter;
  const reset = response.headers.get("RateLimit-Reset");
  return reset !== null && /^\s*\d+\s*$/.test(reset) ? Number(reset) : null;
}

/** The error for a non-2xx answer whose body has been read as `text`. */
export function errorFromResponse(response: Response, text: string): ConnectError {
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // not JSON (a proxy's page): the status alone says what happened
  }
  const code = typeof body["error"] === "string" ? (body["error"] as string) : null;
  const cls: ErrorClass = (code !== null ? BY_CODE[code] : undefined) ?? (response.status >= 500 ? ServerError : ClientError);
  const requestId = response.headers.get("X-Request-Id") ?? (typeof body["requestId"] === "string" ? (body["requestId"] as string) : null);
  return new cls({
    status: response.status,
    code: code ?? `http_${response.status}`,
    body,
    headers: response.headers,
    requestId,
    retryAfter: waitSeconds(response),
  });
}

// --- webhook verification ---------------------------------------------------------------------

/** A webhook request that must be refused (answer 400); each cause is its own subclass. */
export class WebhookVerificationError extends Error { override name = "WebhookVerificationError"; }
/** No `Svc-Signature` header. */
export class MissingSignature extends WebhookVerificationError { override name = "MissingSignature"; }
/** `Svc-Signature` is not `t=<seconds>,kid=<id>,v1=<base64url>`. */
export class MalformedSignature extends WebhookVerificationError { override name = "MalformedSignature"; }
/** The signed timestamp is further from now than the tolerance (a replayed or delayed request). */
export class TimestampOutsideTolerance extends WebhookVerificationError { override name = "TimestampOutsideTolerance"; }
/** No published key has the signature's `kid`, even after fetching the key set again. */
export class UnknownKeyId extends WebhookVerificationError { override name = "UnknownKeyId"; }
/** The signature does not verify over `<t>.<raw body>` (the body or the header was altered). */
export class InvalidSignature extends WebhookVerificationError { override name = "InvalidSignature"; }
/** The signature verifies but the body is not a JSON event object. */
export class InvalidPayload extends WebhookVerificationError { override name = "InvalidPayload"; }
/** The key set could not be fetched or read. */
export class KeySetUnavailable extends WebhookVerificationError { override name = "KeySetUnavailable"; }
