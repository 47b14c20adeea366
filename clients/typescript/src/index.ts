/**
 * The official TypeScript client for the Connect API.
 *
 *     import { Connect } from "connect-client";
 *     const client = new Connect({ baseUrl: "https://connect.example.com", apiKey: "svc_…" });
 *     for await (const session of client.sessions.list()) console.log(session.id, session.status);
 */
export { Connect, OPERATIONS, type ConnectOptions } from "./client.js";
export * from "./errors.js";
export {
  APIResponse, DEFAULT_RETRY, ETagCache, ENV_API_KEY, ENV_BASE_URL, VERSION, type RequestOptions, type RetryPolicy,
} from "./http.js";
export { Paginator, type Page } from "./pagination.js";
export type { WithRawResponse } from "./resource.js";
export { EventStream, type StreamOptions } from "./stream.js";
export { KeySet, keySetFor, keysFromJwks, parseSignature, verifyWebhook, type Jwks, type VerifyWebhookOptions } from "./verify.js";
export type * from "./types.js";
export type { SessionListParams } from "./resources/sessions.js";
export type { TranscriptParams, RevisionsParams, SearchParams } from "./resources/transcripts.js";
export type { EventListParams } from "./resources/events.js";
export type { DeliveryListParams } from "./resources/deliveries.js";
export type { RecoverParams } from "./resources/webhooks.js";
export type { IngestSessionFields } from "./resources/ingest.js";
export type { components, operations, paths } from "./generated/openapi.js";
