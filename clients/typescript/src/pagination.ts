/**
 * Lazy async iteration over cursor-paged lists: the next page is fetched only when the items of
 * the one before are used up. `.page(cursor)` reads a single page.
 *
 * Two ways a list ends: resource lists (sessions, search, webhooks, deliveries) end when
 * `nextCursor` is null; the event log's `nextCursor` is never null (a poller keeps calling with
 * it), so its iteration ends at an empty page that is not `Events-Unsettled` — everything
 * committed so far — and `nextCursor` is then where the next poll starts.
 */
import { APIResponse, type QueryValue, type RequestOptions, type Transport, sleep } from "./http.js";

const UNSETTLED_WAIT_MS = 200; // between pages while older transactions hold the log back

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
  /** Event log only: committed events wait behind an older transaction; page again shortly. */
  unsettled: boolean;
}

/** One paged list operation: where it lives and how it pages. */
export interface ListCall {
  path: string;
  query: Record<string, QueryValue>;
  cursorParam?: "cursor" | "after";
  /** The event log: never-null cursor, `Events-Unsettled`. */
  log?: boolean;
}

export class Paginator<T> implements AsyncIterable<T> {
  /** After iteration: where the next call would start. */
  nextCursor: string | null;

  constructor(private readonly transport: Transport, private readonly call: ListCall,
              private readonly start: string | null = null, private readonly options: RequestOptions = {}) {
    this.nextCursor = start;
  }

  /** One page: the first (after the list's `after`, for the event log), or `cursor`'s. */
  async page(cursor?: string | null): Promise<Page<T>> {
    return (await this.rawPage(cursor)).parse();
  }

  /** `page()` with its answer's status, headers and request id. */
  async rawPage(cursor?: string | null): Promise<APIResponse<Page<T>>> {
    const from = cursor ?? this.start;
    const query = { ...this.call.query, ...(from !== null ? { [this.call.cursorParam ?? "cursor"]: from } : {}) };
    const { response, text } = await this.transport.request("GET", this.call.path, query, undefined, {}, this.options);
    const body = JSON.parse(text) as { items: T[]; nextCursor?: string | null };
    return new APIResponse(response, {
      items: body.items,
      nextCursor: body.nextCursor ?? null,
      unsettled: response.headers.get("Events-Unsettled") === "true",
    });
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const page = await this.page(this.nextCursor);
      yield* page.items;
      if (page.nextCursor !== null) this.nextCursor = page.nextCursor;
      if (this.call.log ? page.items.length === 0 && !page.unsettled : page.nextCursor === null) return;
      if (page.unsettled && page.items.length === 0) await sleep(UNSETTLED_WAIT_MS, this.options.signal);
    }
  }

  /** Every item, all pages read (for short lists). */
  async toArray(): Promise<T[]> {
    const all: T[] = [];
    for await (const item of this) all.push(item);
    return all;
  }
}
