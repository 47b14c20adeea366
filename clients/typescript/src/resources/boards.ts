/** `client.boards`: a session's boards (every version) and one board's current content. */
import type { RequestOptions } from "../http.js";
import { APIResource, json, seg } from "../resource.js";
import type { Board, BoardSummary } from "../types.js";

export class Boards extends APIResource {
  /** Every version of every board of the session, newest version first per board. Conditional. */
  list(sessionId: string, options?: RequestOptions): Promise<BoardSummary[]> {
    return this.send({ method: "GET", path: `/api/v1/sessions/${seg(sessionId)}/boards`, parse: json<BoardSummary[]>("items") }, options);
  }

  /** The current version, with its payload. Conditional. */
  get(sessionId: string, boardSpecId: string, options?: RequestOptions): Promise<Board> {
    return this.send({
      method: "GET", path: `/api/v1/sessions/${seg(sessionId)}/boards/${seg(boardSpecId)}`, parse: json<Board>("board"),
    }, options);
  }
}
