// Type-checked (never run) by test/readme.test.mjs: what the declarations promise a user.
import {
  Connect, type APIResponse, type Page, type Session, type StreamEvent, type Transcript, type TranscriptRevision,
} from "connect-client";

const client = new Connect({ baseUrl: "https://connect.example.com", apiKey: "svc_…" });
const raw: APIResponse<Session> = await client.sessions.withRawResponse.get("ses_1");
const rawPage: APIResponse<Page<Session>> = await client.sessions.withRawResponse.list({ limit: 2 });
const vtt: string = await client.transcripts.get("ses_1", { format: "vtt" });
const json: Transcript = await client.transcripts.get("ses_1");
const revisions: TranscriptRevision[] = await client.transcripts.revisions("ses_1", { revisionKind: "final" });
// @ts-expect-error the JSON transcript is not a string
const notText: string = await client.transcripts.get("ses_1");
// @ts-expect-error the stream has no raw form
void client.events.withRawResponse.stream;
// @ts-expect-error not a session status
void client.sessions.list({ status: "paused" });
// @ts-expect-error a stream filter needs a known type
void client.events.stream({ filters: [{ type: "session.deleted" }] });
for await (const event of client.events.stream({ filters: [{ type: "session.created" }] })) {
  const typed: StreamEvent = event;
  if (event.type === "session.created") console.log(event.data.session.status);
  // @ts-expect-error a segment's data is only on its own kind
  else console.log(event.data.text);
  console.log(typed.id);
}
console.log(raw.status, rawPage.parse().items, vtt, json.transcript, revisions, notText);
