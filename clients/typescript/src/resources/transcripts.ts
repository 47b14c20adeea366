/** `client.transcripts`: the flat transcript, the revisions (JSON, or an export as a string), and search. */
import type { RequestOptions } from "../http.js";
import type { Paginator } from "../pagination.js";
import { APIResource, asText, json, seg } from "../resource.js";
import type { RevisionKind, SearchHit, TextFormat, Transcript, TranscriptFormat, TranscriptRevision } from "../types.js";

const FORMATS: readonly TranscriptFormat[] = ["json", "vtt", "srt", "txt"];

export interface TranscriptParams<F extends TranscriptFormat = TranscriptFormat> {
  /** `json` (default) or an export: `vtt`, `srt`, `txt`, answered as text. */
  format?: F;
  /** vtt and srt: split cues longer than this. */
  maxCueChars?: number;
}

export interface RevisionsParams<F extends TranscriptFormat = TranscriptFormat> extends TranscriptParams<F> {
  revisionKind?: RevisionKind;
}

export interface SearchParams {
  revisionKind?: RevisionKind;
  limit?: number;
  /** `semantic` and `hybrid` search by meaning where the server has it on (else a 400). */
  mode?: "keyword" | "semantic" | "hybrid";
}

function formatQuery(format: TranscriptFormat | undefined, maxCueChars: number | undefined) {
  const chosen = format ?? "json";
  if (!FORMATS.includes(chosen)) throw new TypeError(`format must be one of ${FORMATS.join(", ")}`);
  return { format: chosen === "json" ? undefined : chosen, maxCueChars };
}

export class Transcripts extends APIResource {
  /** The session's flat transcript: a `Transcript` for `json`; the exported text otherwise. Conditional. */
  get(sessionId: string, params?: TranscriptParams<"json">, options?: RequestOptions): Promise<Transcript>;
  get(sessionId: string, params: TranscriptParams<TextFormat>, options?: RequestOptions): Promise<string>;
  get(sessionId: string, params?: TranscriptParams, options?: RequestOptions): Promise<Transcript | string>;
  get(sessionId: string, params: TranscriptParams = {}, options?: RequestOptions): Promise<Transcript | string> {
    const query = formatQuery(params.format, params.maxCueChars);
    return this.send<Transcript | string>({
      method: "GET", path: `/api/v1/sessions/${seg(sessionId)}/transcript`, query,
      parse: query.format ? asText : json<Transcript>(),
    }, options);
  }

  /** Committed and final revisions (or one kind); the exported text for `vtt`, `srt`, `txt`. Conditional. */
  revisions(sessionId: string, params?: RevisionsParams<"json">, options?: RequestOptions): Promise<TranscriptRevision[]>;
  revisions(sessionId: string, params: RevisionsParams<TextFormat>, options?: RequestOptions): Promise<string>;
  revisions(sessionId: string, params?: RevisionsParams, options?: RequestOptions): Promise<TranscriptRevision[] | string>;
  revisions(sessionId: string, params: RevisionsParams = {}, options?: RequestOptions): Promise<TranscriptRevision[] | string> {
    const query = { ...formatQuery(params.format, params.maxCueChars), revisionKind: params.revisionKind };
    return this.send<TranscriptRevision[] | string>({
      method: "GET", path: `/api/v1/sessions/${seg(sessionId)}/transcripts`, query,
      parse: query.format ? asText : json<TranscriptRevision[]>("transcripts"),
    }, options);
  }

  /** Search across the workspace's transcripts, best match first (by words, by default). */
  search(query: string, params: SearchParams = {}, options?: RequestOptions): Paginator<SearchHit> {
    return this.paginate({
      path: "/api/v1/transcripts/search",
      query: { query, revisionKind: params.revisionKind, limit: params.limit, mode: params.mode },
    }, null, options);
  }
}
