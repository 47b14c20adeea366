/**
 * `Connect`: the client. Configuration: `baseUrl` else `CONNECT_BASE_URL`; one of `apiKey`,
 * `token` (OAuth) or `ingestKey` (a recorder's, which calls `client.ingest` only) else
 * `CONNECT_API_KEY`; neither given nor set is a `ConfigurationError` that says both ways.
 */
import { DEFAULT_CACHE_BYTES, DEFAULT_RETRY, type RetryPolicy, Transport, baseUrlFrom, credentialFrom } from "./http.js";
import { Boards } from "./resources/boards.js";
import { Deliveries } from "./resources/deliveries.js";
import { Events } from "./resources/events.js";
import { Ingest, IngestSessions } from "./resources/ingest.js";
import { Sessions } from "./resources/sessions.js";
import { Transcripts } from "./resources/transcripts.js";
import { Webhooks } from "./resources/webhooks.js";

export interface ConnectOptions {
  /** e.g. `https://connect.example.com`; default `CONNECT_BASE_URL`. */
  baseUrl?: string;
  /** An API key (`svc_…`); default `CONNECT_API_KEY`. */
  apiKey?: string;
  /** An OAuth access token, instead of an API key. */
  token?: string;
  /** A recorder's ingest key, instead of an API key. */
  ingestKey?: string;
  /** Milliseconds to wait for each attempt's answer (default 30 000). */
  timeout?: number;
  /** The retry budget (see the README); `{ maxRetries: 0 }` turns retries off. */
  retry?: Partial<RetryPolicy>;
  /** Bytes of answers kept for conditional GETs (default 8 MiB; 0 turns the cache off). */
  etagCacheBytes?: number;
  /** Another `fetch` (a proxy agent's, a recorder in tests); default the global one. */
  fetch?: typeof fetch;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

/** Every REST operation of /openapi.json and the client method that performs it (the tests check it is complete). */
export const OPERATIONS: Readonly<Record<string, string>> = {
  listSessions: "sessions.list",
  getSession: "sessions.get",
  getTranscript: "transcripts.get",
  listTranscriptRevisions: "transcripts.revisions",
  searchTranscripts: "transcripts.search",
  listBoards: "boards.list",
  getBoard: "boards.get",
  listEvents: "events.list",
  getEvent: "events.get",
  streamEvents: "events.stream",
  listWebhooks: "webhooks.list",
  createWebhook: "webhooks.create",
  getWebhook: "webhooks.get",
  updateWebhook: "webhooks.update",
  deleteWebhook: "webhooks.delete",
  testWebhook: "webhooks.test",
  recoverWebhook: "webhooks.recover",
  rotateWebhookSecret: "webhooks.rotateSecret",
  listWebhookDeliveries: "deliveries.list",
  getWebhookDelivery: "deliveries.get",
  replayWebhookDelivery: "deliveries.replay",
  ingestPutSession: "ingest.sessions.upsert",
  ingestAppendSegments: "ingest.sessions.appendSegments",
  ingestSetStatus: "ingest.sessions.setStatus",
  ingestPutFinalTranscript: "ingest.sessions.putFinalTranscript",
  ingestPutBoard: "ingest.sessions.putBoard",
};

export class Connect {
  readonly baseUrl: string;
  readonly sessions: Sessions;
  readonly transcripts: Transcripts;
  readonly boards: Boards;
  readonly events: Events;
  readonly webhooks: Webhooks;
  readonly deliveries: Deliveries;
  readonly ingest: Ingest;
  private readonly transport: Transport;

  constructor(options: ConnectOptions = {}) {
    this.baseUrl = baseUrlFrom(options.baseUrl);
    this.transport = new Transport({
      baseUrl: this.baseUrl,
      credential: credentialFrom(options.apiKey, options.token, options.ingestKey),
      timeout: options.timeout ?? 30_000,
      retry: { ...DEFAULT_RETRY, ...options.retry },
      fetch: options.fetch ?? ((input, init) => fetch(input, init)),
      etagCacheBytes: options.etagCacheBytes ?? DEFAULT_CACHE_BYTES,
      ...(options.headers ? { headers: options.headers } : {}),
    });
    this.sessions = new Sessions(this.transport);
    this.transcripts = new Transcripts(this.transport);
    this.boards = new Boards(this.transport);
    this.events = new Events(this.transport);
    this.webhooks = new Webhooks(this.transport);
    this.deliveries = new Deliveries(this.transport);
    this.ingest = new Ingest(new IngestSessions(this.transport));
  }

  /** The conditional-GET cache (its `size` and `bytes`). */
  get etagCache() { return this.transport.cache; }
}
