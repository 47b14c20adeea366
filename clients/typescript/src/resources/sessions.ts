/** `client.sessions`: list (newest first, lazily paged) and get. */
import type { RequestOptions } from "../http.js";
import type { Paginator } from "../pagination.js";
import { APIResource, json, seg, timestamp } from "../resource.js";
import type { Session, SessionStatus } from "../types.js";

export interface SessionListParams {
  /** One status or several. */
  status?: SessionStatus | SessionStatus[];
  /** Exclusive bounds. */
  createdAfter?: Date | string;
  createdBefore?: Date | string;
  /** Page size, 1–100. */
  limit?: number;
}

export class Sessions extends APIResource {
  /** Newest first; `for await` follows the cursors, `.page()` reads one page. */
  list(params: SessionListParams = {}, options?: RequestOptions): Paginator<Session> {
    return this.paginate({
      path: "/api/v1/sessions",
      query: { status: params.status, limit: params.limit, createdAfter: timestamp(params.createdAfter),
               createdBefore: timestamp(params.createdBefore) },
    }, null, options);
  }

  /** Conditional: an unchanged session is answered `304` and returned from the cache. */
  get(sessionId: string, options?: RequestOptions): Promise<Session> {
    return this.send({ method: "GET", path: `/api/v1/sessions/${seg(sessionId)}`, parse: json<Session>("session") }, options);
  }
}
