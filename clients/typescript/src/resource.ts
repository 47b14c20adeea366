/**
 * What every resource namespace shares: sending one request (plain or raw), a list's paginator
 * (or, raw, its first page), and the encodings its methods use.
 *
 * `.withRawResponse` is the same resource in raw mode: each method takes the same arguments and
 * resolves with the `APIResponse` (status, headers, request id, `parse()`); a list's raw form is
 * its first page's. Its type is derived from the resource's own (`WithRawResponse`), so the
 * two never disagree.
 */
import { APIResponse, type Request, type RequestOptions, type Transport } from "./http.js";
import { type ListCall, type Page, Paginator } from "./pagination.js";

/** A resource's methods, each resolving with the `APIResponse` of what it returns. */
export type WithRawResponse<R> = {
  [K in Exclude<keyof R, "withRawResponse"> as R[K] extends (...args: never[]) => Paginator<unknown> | Promise<unknown> ? K : never]:
    R[K] extends (...args: infer A) => Paginator<infer T> ? (...args: A) => Promise<APIResponse<Page<T>>>
    : R[K] extends (...args: infer A) => Promise<infer T> ? (...args: A) => Promise<APIResponse<T>>
    : never;
};

export abstract class APIResource {
  constructor(protected readonly transport: Transport, protected readonly raw: boolean = false) {}

  /** This resource in raw mode (see the module's comment). */
  get withRawResponse(): WithRawResponse<this> {
    const Resource = this.constructor as new (transport: Transport, raw: boolean) => this;
    return new Resource(this.transport, true) as unknown as WithRawResponse<this>;
  }

  protected async send<T>(request: Request<T>, options?: RequestOptions): Promise<T> {
    const answer = await this.transport.exchange(request, options);
    return (this.raw ? answer : answer.parse()) as T;
  }

  protected paginate<T>(call: ListCall, start: string | null = null, options?: RequestOptions): Paginator<T> {
    const paginator = new Paginator<T>(this.transport, call, start, options);
    return (this.raw ? paginator.rawPage() : paginator) as unknown as Paginator<T>;
  }
}

/** A path segment: a non-empty id, percent-encoded. */
export function seg(value: string): string {
  if (typeof value !== "string" || value === "") throw new TypeError("an id must be a non-empty string");
  return encodeURIComponent(value);
}

/** A timestamp parameter: a `Date` as ISO 8601 UTC with milliseconds, a string as given. */
export function timestamp(value: Date | string | undefined): string | undefined {
  return value instanceof Date ? value.toISOString() : value;
}

export function json<T>(key?: string): (text: string) => T {
  return (text) => {
    const body = JSON.parse(text) as Record<string, unknown>;
    return (key ? body[key] : body) as T;
  };
}

export const asText = (text: string): string => text;
export const nothing = (): void => undefined;
