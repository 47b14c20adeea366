// The event stream across a dropped connection, mid-meeting: a proxy cuts it after the first
// segments, more segments commit while the client is away, and the client reconnects (no
// sooner than the `retry:` the stream asked for) with Last-Event-ID; it hands out every event
// of the session once, in the log's order.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Connect } from "connect-client";
import { Proxy } from "../testing/proxy.mjs";
import { client, ingest, live, unique, waitFor } from "../testing/live.mjs";

const RETRY_MS = 1500;

function segments(from, count) {
  return Array.from({ length: count }, (_, i) => ({
    sequence: from + i, timestampStart: (from + i) * 1000, timestampEnd: (from + i) * 1000 + 900,
    speakerLabel: "Speaker 1", text: `segment ${from + i}`, confidence: 0.9,
  }));
}

test("a stream cut mid-meeting resumes with Last-Event-ID: nothing missed, nothing repeated", async (t) => {
  const recorder = ingest();
  const externalId = unique("ts-stream");
  const { id: sessionId } = await recorder.ingest.sessions.upsert(externalId, { label: "Stream test" });
  const proxy = await Proxy.start(live.baseUrl, { retry: RETRY_MS });
  t.after(() => proxy.close());

  const watcher = new Connect({ baseUrl: proxy.url, apiKey: live.key });
  const filters = [{ type: "transcript.segment.created", sessionId }, { type: "session.status_changed", sessionId }];
  const stream = watcher.events.stream({ filters, minBackoff: 100 });
  const got = [];
  let failure;
  const following = (async () => {
    try { for await (const event of stream) got.push(event); } catch (error) { failure = error; }
  })();
  t.after(() => stream.close());
  const count = (n, what) => waitFor(() => { assert.equal(failure, undefined); return got.length >= n; }, what);

  await waitFor(() => stream.connections === 1, "the stream to open");
  await recorder.ingest.sessions.appendSegments(externalId, segments(0, 3));
  await count(3, "the first three segments");
  assert.equal(stream.retryMs, RETRY_MS, "the stream's retry: field was read");
  const lastBefore = got[2].id;

  proxy.cut();
  const cutAt = performance.now();
  await recorder.ingest.sessions.appendSegments(externalId, segments(3, 3)); // while the client is away
  await waitFor(() => stream.connections === 2, "the reconnection");
  const second = proxy.connections[1];
  assert.match(second.request, new RegExp(`^last-event-id: ${lastBefore}\r$`, "im"), second.request);
  assert.ok(second.openedAt - cutAt >= RETRY_MS * 0.95, `reconnected after ${second.openedAt - cutAt} ms`);

  await recorder.ingest.sessions.appendSegments(externalId, segments(6, 3));
  await recorder.ingest.sessions.setStatus(externalId, "processing");
  await recorder.ingest.sessions.setStatus(externalId, "completed");
  await count(11, "nine segments and two status changes");

  const log = await client().events.list({ sessionId, type: ["transcript.segment.created", "session.status_changed"] }).toArray();
  assert.deepEqual(got.map((e) => e.id), log.map((e) => e.id), "every event once, in the log's order");
  assert.deepEqual(got.filter((e) => e.type === "transcript.segment.created").map((e) => e.data.sequence),
                   [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(got.filter((e) => e.type === "session.status_changed").map((e) => e.data.status), ["processing", "completed"]);

  stream.close();
  await following;
  assert.equal(failure, undefined);
  assert.equal(stream.connections, 2);
});

test("a connection gone silent is dropped after heartbeatTimeout and resumed", async (t) => {
  // The server pings every second here (the test module sets CONNECT_SSE_HEARTBEAT_SECONDS=1),
  // so only the connection the proxy silences goes five seconds without a byte.
  const recorder = ingest();
  const externalId = unique("ts-silent");
  const { id: sessionId } = await recorder.ingest.sessions.upsert(externalId, { label: "Silent test" });
  const proxy = await Proxy.start(live.baseUrl);
  t.after(() => proxy.close());
  const watcher = new Connect({ baseUrl: proxy.url, apiKey: live.key });
  const stream = watcher.events.stream({ filters: [{ type: "transcript.segment.created", sessionId }], heartbeatTimeout: 5000,
                                         minBackoff: 100 });
  const got = [];
  let failure;
  const following = (async () => {
    try { for await (const event of stream) got.push(event); } catch (error) { failure = error; }
  })();
  t.after(() => stream.close());

  await waitFor(() => stream.connections === 1, "the stream to open");
  await recorder.ingest.sessions.appendSegments(externalId, segments(0, 1));
  await waitFor(() => got.length === 1, "the first segment");
  const silenced = proxy.connections.length;
  proxy.silence();
  await recorder.ingest.sessions.appendSegments(externalId, segments(1, 1)); // sent into the silence
  await waitFor(() => got.length === 2, "the second segment, after reconnecting");
  assert.ok(proxy.connections.length > silenced, "a new connection");
  assert.match(proxy.connections[silenced].request, new RegExp(`^last-event-id: ${got[0].id}\\r$`, "im"));
  assert.deepEqual(got.map((e) => e.data.sequence), [0, 1]);
  stream.close();
  await following;
  assert.equal(failure, undefined);
});
