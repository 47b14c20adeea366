/**
 * The event stream, followed so that a consumer sees every event once, in order.
 *
 * - Reconnects after any temporary end (EOF, reset, `429`, `5xx`, a silent connection) with
 *   exponential backoff and equal jitter, never sooner than the server's `Retry-After` or the
 *   stream's own `retry:` field; the backoff resets once a stream is open.
 * - Sends `Last-Event-ID` with the last event handed to the consumer, so the server replays
 *   what was missed within its resume window.
 * - After `: resume-unavailable` (the server could not replay) it pages the event log
 *   (`GET /api/v1/events?after=<last id>`) before reading the live stream further: the stream is
 *   already open, so whatever commits meanwhile arrives live too, and a copy is dropped by id.
 *   When the log cannot reach back either (`410 resync_required`), `onResync(error)` is called
 *   (default: the `ResyncRequired` is thrown) — reconcile through the resources.
 * - A connection with no byte (event or `: ping`) for `heartbeatTimeout` ms is dropped and
 *   reopened: a dead peer that never sent FIN or RST.
 * - A refusal retrying cannot change (`400`, `401`, `403`, `404`) ends iteration with its typed
 *   error. `close()`, the `signal`, or leaving the `for await` loop ends it cleanly.
 */
import { ConnectError, ResyncRequired, errorFromResponse } from "./errors.js";
import { backoff, sleep, type Transport } from "./http.js";
import { Paginator } from "./pagination.js";
import type { EventType, StreamEvent, StreamFilter } from "./types.js";

const STREAM_PATH = "/api/v1/events/stream";
const DEFAULT_TYPES: readonly EventType[] = ["session.created", "session.status_changed"]; // a stream without filters
const RECENT_IDS = 10_000;

export interface StreamOptions {
  /** OR-matched entries; without them the stream carries session events as far as the scopes allow. */
  filters?: StreamFilter[];
  /** Resume after this event id (e.g. one stored by an earlier run). */
  lastEventId?: string;
  /** Milliseconds without a byte before the connection is taken for dead (the server pings every 15 s). */
  heartbeatTimeout?: number;
  /** Milliseconds to wait for a connection's answer. */
  connectTimeout?: number;
  minBackoff?: number;
  maxBackoff?: number;
  /** Called when the event log can no longer fill a gap; default: the `ResyncRequired` is thrown. */
  onResync?: (error: ResyncRequired) => void | Promise<void>;
  /** Aborting it ends the stream (iteration returns). */
  signal?: AbortSignal;
}

class Retry extends Error {
  constructor(readonly retryAfter: number | null = null) { super("retry"); }
}

interface Frame { id: string | null; data: string[] }

export class EventStream implements AsyncIterable<StreamEvent> {
  lastEventId: string | null;
  /** Streams opened so far. */
  connections = 0;
  /** Times the event log filled a gap the stream could not replay. */
  catchUps = 0;
  /** The reconnection time the server last asked for with `retry:` (ms), if any. */
  retryMs: number | null = null;
  private readonly recent = new Set<string>();
  private readonly closing = new AbortController();
  private failures = 0;

  constructor(private readonly transport: Transport, private readonly options: StreamOptions = {}) {
    this.lastEventId = options.lastEventId ?? null;
    options.signal?.addEventListener("abort", () => this.close(), { once: true });
    if (options.signal?.aborted) this.close();
  }

  get closed(): boolean { return this.closing.signal.aborted; }

  /** Ends iteration (from anywhere); an open connection is cut. */
  close(): void { this.closing.abort(); }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamEvent> {
    try {
      while (!this.closed) {
        let retryAfter: number | null = null;
        try {
          yield* this.connection();
        } catch (error) {
          if (this.closed) break;
          if (error instanceof Retry) retryAfter = error.retryAfter;
          else if (error instanceof ConnectError) throw error;
          // anything else is the connection's failure: reconnect
        }
        if (this.closed) break;
        try {
          await sleep(this.delay(retryAfter), this.closing.signal);
        } catch {
          break;
        }
      }
    } finally {
      this.close();
    }
  }

  private delay(retryAfter: number | null): number {
    const { minBackoff = 1_000, maxBackoff = 60_000 } = this.options;
    const wait = Math.max(backoff(this.failures, minBackoff, maxBackoff), this.retryMs ?? 0, (retryAfter ?? 0) * 1000);
    this.failures += 1;
    return wait;
  }

  private url(): string {
    const filters = this.options.filters;
    const query = filters?.length ? `?filters=${encodeURIComponent(JSON.stringify(filters))}` : "";
    return this.transport.baseUrl + STREAM_PATH + query;
  }

  private async *connection(): AsyncGenerator<StreamEvent> {
    const connection = new AbortController();
    const cut = () => connection.abort();
    this.closing.signal.addEventListener("abort", cut, { once: true });
    const headers: Record<string, string> = { ...this.transport.headers, Accept: "text/event-stream" };
    if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
    let silence = setTimeout(cut, this.options.connectTimeout ?? 10_000);
    try {
      let response: Response;
      try {
        response = await this.transport.options.fetch(this.url(), { headers, signal: connection.signal });
      } catch {
        throw new Retry();
      }
      if (response.status !== 200 || !response.body) {
        const error = errorFromResponse(response, await response.text().catch(() => ""));
        if (response.status === 429 || response.status >= 500) throw new Retry(error.retryAfter);
        throw error; // 400, 401, 403, 404: retrying will not change them
      }
      this.connections += 1;
      this.failures = 0;
      const heartbeat = this.options.heartbeatTimeout ?? 45_000;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let frame: Frame = { id: null, data: [] };
      try {
        for (;;) {
          clearTimeout(silence);
          silence = setTimeout(cut, heartbeat);
          let chunk: ReadableStreamReadResult<string>;
          try {
            chunk = await reader.read();
          } catch {
            throw new Retry();
          }
          if (chunk.done) return; // the server ended it: reconnect
          buffer += chunk.value;
          for (;;) {
            const end = buffer.search(/\r\n|\r|\n/);
            if (end < 0 || (buffer[end] === "\r" && end === buffer.length - 1)) break; // a CR may precede an LF not yet read
            const line = buffer.slice(0, end);
            buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
            if (line === "") {
              const event = this.dispatch(frame);
              frame = { id: null, data: [] };
              if (event && this.accept(event)) yield event;
            } else if (line.startsWith(":")) {
              if (line.slice(1).trim() === "resume-unavailable") yield* this.catchUp();
            } else {
              this.field(line, frame);
            }
          }
        }
      } finally {
        reader.cancel().catch(() => undefined);
      }
    } finally {
      clearTimeout(silence);
      this.closing.signal.removeEventListener("abort", cut);
      connection.abort();
    }
  }

  private field(line: string, frame: Frame): void {
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") frame.data.push(value);
    else if (name === "id" && !value.includes("\0")) frame.id = value;
    else if (name === "retry" && /^\d+$/.test(value)) this.retryMs = Number(value);
  }

  private dispatch(frame: Frame): StreamEvent | null {
    if (frame.data.length === 0) return null;
    const envelope = JSON.parse(frame.data.join("\n")) as Omit<StreamEvent, "id">;
    return { ...envelope, id: frame.id ?? "" } as StreamEvent;
  }

  /** True the first time an id is seen; remembers it as the last one handed out. */
  private accept(event: StreamEvent): boolean {
    if (!event.id) return true;
    if (this.recent.has(event.id)) return false;
    if (this.recent.size >= RECENT_IDS) this.recent.delete(this.recent.values().next().value as string);
    this.recent.add(event.id);
    this.lastEventId = event.id;
    return true;
  }

  private matches(event: StreamEvent): boolean {
    const filters = this.options.filters;
    if (!filters?.length) return DEFAULT_TYPES.includes(event.type);
    return filters.some((entry) => entry.type === event.type && (entry.sessionId === undefined || entry.sessionId === event.sessionId));
  }

  private async *catchUp(): AsyncGenerator<StreamEvent> {
    if (this.lastEventId === null) return; // nothing handed out yet: there is no gap to fill
    this.catchUps += 1;
    const types = this.options.filters?.length ? [...new Set(this.options.filters.map((f) => f.type))].sort() : undefined;
    const log = new Paginator<StreamEvent>(this.transport, {
      path: "/api/v1/events", query: { type: types, limit: 100 }, cursorParam: "after", log: true,
    }, this.lastEventId, { signal: this.closing.signal });
    try {
      for await (const event of log) {
        if (this.matches(event) && this.accept(event)) yield event;
      }
    } catch (error) {
      if (!(error instanceof ResyncRequired)) throw error;
      if (!this.options.onResync) throw error;
      await this.options.onResync(error);
    }
  }
}
