/**
 * The public names of the wire types: each an alias of a schema generated from /openapi.json
 * (src/generated/openapi.ts), so a field the API adds or changes reaches the client's types by
 * regenerating, never by hand. Objects are returned as the API sends them (camelCase fields).
 */
import type { components, operations } from "./generated/openapi.js";

type Schemas = components["schemas"];
type Body<Op extends keyof operations> = operations[Op] extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;

export type Session = Schemas["SessionOut"];
export type SessionSummary = Schemas["SessionSummaryOut"];
export type SessionPage = Schemas["SessionPage"];
export type Transcript = Schemas["FlatTranscript"];
export type FlatSegment = Schemas["FlatSegmentOut"];
export type TranscriptRevision = Schemas["TranscriptRevisionOut"];
export type RevisionSegment = Schemas["RevisionSegmentOut"];
export type SearchHit = Schemas["SearchHitOut"];
export type BoardSummary = Schemas["BoardSummaryOut"];
export type Board = Schemas["BoardOut"];
export type Event = Schemas["Event"];
export type Webhook = Schemas["EndpointOut"];
export type WebhookFilter = Schemas["FilterEntry"];
export type Delivery = Schemas["DeliveryOut"];
export type DeliveryWithAttempts = Schemas["DeliveryWithAttemptsOut"];
export type DeliveryAttempt = Schemas["AttemptOut"];
export type Recovery = Schemas["WebhookRecovery"];
export type IngestSession = Schemas["IngestSessionOut"];
export type AppendResult = Schemas["IngestAppendOut"];
export type FinalTranscriptResult = Schemas["IngestFinalTranscriptOut"];
export type JsonWebKeySet = Schemas["JsonWebKeySet"];
export type ErrorBody = Schemas["Error"];

export type SessionStatus = Session["status"];
export type EventType = Event["type"];
export type RevisionKind = "committed" | "final";
export type TextFormat = "vtt" | "srt" | "txt";
export type TranscriptFormat = "json" | TextFormat;

/** One entry of a stream's `filters`: `type`, and `sessionId` (required for segment events). */
export type StreamFilter = Schemas["EventStreamFilterEntry"];
/** An event as the stream and the log give it: its kind's typed `data`, and its `evt_` id. */
export type StreamEvent =
  | (Schemas["SessionCreatedEvent"] & { id: string })
  | (Schemas["SessionStatusChangedEvent"] & { id: string })
  | (Schemas["TranscriptSegmentCreatedEvent"] & { id: string });

export type WebhookCreate = Schemas["WebhookCreate"];
export type WebhookUpdate = Schemas["WebhookUpdate"];
export type WebhookRecover = Schemas["WebhookRecover"];

/** What a webhook request carries: one of the kinds webhooks deliver (`webhook.test` included). */
export type WebhookEvent =
  | Body<"receive_session_created">
  | Body<"receive_session_status_changed">
  | Body<"receive_webhook_test">;

export type IngestSessionBody = Body<"ingestPutSession">;
export type IngestSegment = Body<"ingestAppendSegments"> extends { segments: Array<infer S> } ? S : never;
export type IngestFinalSegment = Body<"ingestPutFinalTranscript"> extends { segments: Array<infer S> } ? S : never;
export type IngestStatus = Body<"ingestSetStatus"> extends { status: infer S } ? S : never;
export type IngestBoardBody = Body<"ingestPutBoard">;
