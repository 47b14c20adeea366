// Every resource against the live server: pagination across pages, conditional GETs, raw
// responses, transcripts in every form, search, boards, the event log, environment configuration.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Connect, ConfigurationError, Paginator } from "connect-client";
import { client, ingest, live, unique } from "../testing/live.mjs";

test("sessions.list follows cursors across pages, newest first; .page() reads one", async () => {
  const connect = client();
  const listed = [];
  for await (const session of connect.sessions.list({ limit: 2 })) listed.push(session.id);
  const seeded = live.sessionIds;
  // Other tests may add sessions meanwhile (newer ones come first): the seeded ones keep their order.
  assert.deepEqual(listed.filter((id) => seeded.includes(id)), seeded);
  assert.equal(new Set(listed).size, listed.length, "no session twice");
  const first = await connect.sessions.list({ limit: 2 }).page();
  assert.equal(first.items.length, 2);
  assert.ok(first.nextCursor);
  const second = await connect.sessions.list({ limit: 2 }).page(first.nextCursor);
  assert.equal(second.items.length, 2);
  assert.ok(!first.items.some((s) => second.items.some((t) => t.id === s.id)));
  const raw = await connect.sessions.withRawResponse.list({ limit: 2 });
  assert.equal(raw.status, 200);
  assert.match(raw.requestId, /.+/);
  assert.deepEqual(raw.parse().items.map((s) => s.id), first.items.map((s) => s.id));
  assert.ok(connect.sessions.list() instanceof Paginator);
});

test("sessions.list filters by status and creation time", async () => {
  const connect = client();
  const completed = await connect.sessions.list({ status: ["completed"] }).toArray();
  assert.ok(completed.some((s) => s.id === live.transcriptSession));
  assert.ok(completed.every((s) => s.status === "completed"));
  const future = await connect.sessions.list({ createdAfter: new Date(Date.now() + 3600_000) }).toArray();
  assert.deepEqual(future, []);
});

test("sessions.get is conditional: the repeat is a 304 answered from the cache", async () => {
  const connect = client();
  const id = live.sessionIds[0];
  const session = await connect.sessions.get(id);
  assert.equal(session.id, id);
  const again = await connect.sessions.withRawResponse.get(id);
  assert.equal(again.status, 304);
  assert.equal(again.fromCache, true);
  assert.deepEqual(again.parse(), session);
  assert.notEqual(again.parse(), session, "each call gets its own object");
  const uncached = new Connect({ baseUrl: live.baseUrl, apiKey: live.key, etagCacheBytes: 0 });
  await uncached.sessions.get(id);
  assert.equal((await uncached.sessions.withRawResponse.get(id)).status, 200);
});

test("transcripts: JSON, the revisions, and the exports as strings", async () => {
  const connect = client();
  const id = live.transcriptSession;
  const transcript = await connect.transcripts.get(id);
  assert.deepEqual(transcript.transcript.map((s) => s.text), ["Hello, TypeScript.", "The quarterly numbers."]);
  const revisions = await connect.transcripts.revisions(id);
  assert.deepEqual(revisions.map((r) => r.revisionKind).sort(), ["committed", "final"]);
  const committed = await connect.transcripts.revisions(id, { revisionKind: "committed" });
  assert.deepEqual(committed[0].segments.map((s) => s.text), ["hello typescript", "the quarterly numbers"]);
  const vtt = await connect.transcripts.get(id, { format: "vtt" });
  assert.match(vtt, /^WEBVTT/);
  assert.match(await connect.transcripts.get(id, { format: "srt" }), /^1\r?\n00:00:00,000 --> /);
  assert.match(await connect.transcripts.get(id, { format: "txt" }), /Hello, TypeScript\./);
  assert.match(await connect.transcripts.revisions(id, { format: "txt", revisionKind: "committed" }), /hello typescript/);
  assert.throws(() => connect.transcripts.get(id, { format: "pdf" }), TypeError);
});

test("transcripts.search finds the seeded words", async () => {
  const hits = await client().transcripts.search("quarterly").toArray();
  assert.ok(hits.some((hit) => hit.session.id === live.transcriptSession), JSON.stringify(hits));
});

test("ingest and boards: a recorder's session, its board, read back", async () => {
  const recorder = ingest();
  const externalId = unique("ts-board");
  const created = await recorder.ingest.sessions.upsert(externalId, { label: "Board test" });
  assert.equal(created.session.status, "recording");
  const appended = await recorder.ingest.sessions.appendSegments(externalId, [
    { sequence: 0, timestampStart: 0, timestampEnd: 900, text: "first words" }]);
  assert.equal(appended.nextSequence, 1);
  const board = await recorder.ingest.sessions.putBoard(externalId, "summary", {
    status: "ready", sourceRevisionKind: "committed", payload: { bullets: ["one"] } });
  assert.equal(board.boardId, "summary");
  const final = await recorder.ingest.sessions.putFinalTranscript(externalId, [
    { timestampStart: 0, timestampEnd: 900, text: "First words." }]);
  assert.equal(final.segmentCount, 1);
  await recorder.ingest.sessions.setStatus(externalId, "completed");

  const connect = client();
  const boards = await connect.boards.list(created.id);
  assert.deepEqual(boards.map((b) => b.boardId), ["summary"]);
  const current = await connect.boards.get(created.id, "summary");
  assert.deepEqual(current.payload, { bullets: ["one"] });
  assert.equal((await connect.sessions.get(created.id)).status, "completed");
});

test("the event log: list pages to the end, get reads one", async () => {
  const connect = client();
  const log = connect.events.list({ type: "session.created", limit: 2 });
  const events = await log.toArray();
  for (const id of live.sessionIds) assert.ok(events.some((e) => e.sessionId === id), `session.created of ${id}`);
  assert.ok(log.nextCursor, "where the next poll starts");
  const one = await connect.events.get(events[0].id);
  assert.deepEqual(one, events[0]);
  assert.equal(one.data.sessionId, one.sessionId);
  // Other tests record events meanwhile: what follows the cursor is only what came after.
  const later = await connect.events.list({ after: log.nextCursor, type: "session.created" }).toArray();
  assert.ok(!later.some((e) => events.some((seen) => seen.id === e.id)), "nothing read twice");
});

test("configuration comes from CONNECT_BASE_URL and CONNECT_API_KEY, else says both ways", async () => {
  const saved = { url: process.env.CONNECT_BASE_URL, key: process.env.CONNECT_API_KEY };
  try {
    process.env.CONNECT_BASE_URL = live.baseUrl;
    process.env.CONNECT_API_KEY = live.key;
    const fromEnv = new Connect();
    assert.equal(fromEnv.baseUrl, live.baseUrl);
    assert.equal((await fromEnv.sessions.list().page()).items.length > 0, true);
    delete process.env.CONNECT_API_KEY;
    assert.throws(() => new Connect(), (e) => e instanceof ConfigurationError && /CONNECT_API_KEY/.test(e.message));
    delete process.env.CONNECT_BASE_URL;
    assert.throws(() => new Connect({ apiKey: "svc_x" }), /CONNECT_BASE_URL/);
    assert.throws(() => new Connect({ baseUrl: live.baseUrl, apiKey: "a", token: "b" }), ConfigurationError);
  } finally {
    if (saved.url === undefined) delete process.env.CONNECT_BASE_URL; else process.env.CONNECT_BASE_URL = saved.url;
    if (saved.key === undefined) delete process.env.CONNECT_API_KEY; else process.env.CONNECT_API_KEY = saved.key;
  }
});

test("every REST operation of the served /openapi.json has a client method", async () => {
  const { OPERATIONS } = await import("connect-client");
  const document = await (await fetch(`${live.baseUrl}/openapi.json`)).json();
  const connect = client();
  const missing = [];
  for (const [path, item] of Object.entries(document.paths)) {
    if (!path.startsWith("/api/v1/")) continue;
    for (const operation of Object.values(item)) {
      const dotted = OPERATIONS[operation.operationId];
      const method = dotted?.split(".").reduce((target, name) => target?.[name], connect);
      if (typeof method !== "function") missing.push(`${operation.operationId} (${path})`);
    }
  }
  assert.deepEqual(missing, []);
});
