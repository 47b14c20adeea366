/** `client.events`: the event log (`list`, `get`) and the live stream (`stream`). */
import type { RequestOptions } from "../http.js";
import type { Paginator } from "../pagination.js";
import { APIResource, json, seg } from "../resource.js";
import { EventStream, type StreamOptions } from "../stream.js";
import type { EventType, StreamEvent } from "../types.js";

export interface EventListParams {
  /** An `evt_` id (the stream's last id) or a previous page's cursor. */
  after?: string;
  type?: EventType | EventType[];
  sessionId?: string;
  limit?: number;
}

export class Events extends APIResource {
  /**
   * The event log, oldest first, after `after`. Iteration ends with everything committed so far;
   * the paginator's `nextCursor` is where to poll next.
   */
  list(params: EventListParams = {}, options?: RequestOptions): Paginator<StreamEvent> {
    return this.paginate({
      path: "/api/v1/events", query: { type: params.type, sessionId: params.sessionId, limit: params.limit },
      cursorParam: "after", log: true,
    }, params.after ?? null, options);
  }

  get(eventId: string, options?: RequestOptions): Promise<StreamEvent> {
    return this.send({ method: "GET", path: `/api/v1/events/${seg(eventId)}`, parse: json<StreamEvent>() }, options);
  }

  /** Every matching event once, in order, across reconnects (see `EventStream`). */
  stream(options: StreamOptions = {}): EventStream {
    return new EventStream(this.transport, options);
  }
}
