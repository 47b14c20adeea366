/**
 * `client.ingest.sessions`: what a recorder calls to feed Connect (an ingest key's only calls).
 * Every call sends a fresh `Idempotency-Key` (kept across the client's own retries, so a retried
 * write runs once), unless the caller passes its own in `options.headers`.
 */
import type { RequestOptions } from "../http.js";
import { APIResource, json, seg, timestamp } from "../resource.js";
import type {
  AppendResult, Board, FinalTranscriptResult, IngestBoardBody, IngestFinalSegment, IngestSegment, IngestSession,
  IngestStatus,
} from "../types.js";

const PATH = "/api/v1/ingest/sessions";

export interface IngestSessionFields {
  label?: string | null;
  memo?: string | null;
  startedAt?: Date | string;
  endedAt?: Date | string | null;
}

function keyed(options: RequestOptions = {}): RequestOptions {
  const given = Object.keys(options.headers ?? {}).some((h) => h.toLowerCase() === "idempotency-key");
  return given ? options : { ...options, headers: { ...options.headers, "Idempotency-Key": crypto.randomUUID() } };
}

export class IngestSessions extends APIResource {
  /** Create the session (status `recording`) or change the fields passed (`null` clears one). */
  upsert(externalId: string, fields: IngestSessionFields = {}, options?: RequestOptions): Promise<IngestSession> {
    const body: Record<string, unknown> = { ...fields };
    for (const name of ["startedAt", "endedAt"] as const) {
      if (fields[name] instanceof Date) body[name] = timestamp(fields[name] as Date);
    }
    return this.send({ method: "PUT", path: `${PATH}/${seg(externalId)}`, body, parse: json<IngestSession>() }, keyed(options));
  }

  /** Append committed segments, numbered consecutively (`sequence`) from where the revision ends. */
  appendSegments(externalId: string, segments: IngestSegment[], options?: RequestOptions): Promise<AppendResult> {
    return this.send({
      method: "POST", path: `${PATH}/${seg(externalId)}/segments`, body: { segments }, parse: json<AppendResult>(),
    }, keyed(options));
  }

  setStatus(externalId: string, status: IngestStatus, options?: RequestOptions): Promise<IngestSession> {
    return this.send({
      method: "POST", path: `${PATH}/${seg(externalId)}/status`, body: { status }, parse: json<IngestSession>(),
    }, keyed(options));
  }

  /** Replace the final revision (segments in reading order). */
  putFinalTranscript(externalId: string, segments: IngestFinalSegment[], options?: RequestOptions): Promise<FinalTranscriptResult> {
    return this.send({
      method: "PUT", path: `${PATH}/${seg(externalId)}/transcripts/final`, body: { segments },
      parse: json<FinalTranscriptResult>(),
    }, keyed(options));
  }

  /** A new version of the board `boardId`, made current. */
  putBoard(externalId: string, boardId: string, body: IngestBoardBody, options?: RequestOptions): Promise<Board> {
    return this.send({
      method: "PUT", path: `${PATH}/${seg(externalId)}/boards/${seg(boardId)}`, body, parse: json<Board>(),
    }, keyed(options));
  }
}

export class Ingest {
  readonly sessions: IngestSessions;
  constructor(sessions: IngestSessions) { this.sessions = sessions; }
}
