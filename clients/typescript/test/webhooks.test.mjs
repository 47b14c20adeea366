// Webhooks end to end: endpoints and deliveries through the client, and verifyWebhook on real
// deliveries from the live server (its key set fetched over HTTP), refusing a forged signature,
// a stale timestamp, an unknown kid and a missing header.
import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import {
  InvalidSignature, KeySet, MissingSignature, NotFound, TimestampOutsideTolerance, UnknownKeyId, verifyWebhook,
} from "connect-client";
import { client, ingest, live, unique, waitFor } from "../testing/live.mjs";

async function receiver() {
  const requests = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      requests.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { requests, server, url: `http://127.0.0.1:${server.address().port}/hook` };
}

test("endpoints, deliveries and verified real deliveries", async (t) => {
  const hook = await receiver();
  t.after(() => hook.server.close());
  const connect = client();
  const jwksUrl = `${live.baseUrl}/.well-known/webhook-signing-keys.json`;

  const endpoint = await connect.webhooks.create({ name: unique("ts"), url: hook.url, filters: [{ type: "session.created" }] });
  assert.match(endpoint.id, /^wh_/);
  assert.deepEqual((await connect.webhooks.get(endpoint.id)).url, hook.url);
  assert.ok((await connect.webhooks.list({ limit: 100 }).toArray()).some((w) => w.id === endpoint.id));
  const renamed = await connect.webhooks.update(endpoint.id, { name: "renamed" });
  assert.equal(renamed.name, "renamed");

  // A test delivery, verified against the key set the live server publishes.
  const delivery = await connect.webhooks.test(endpoint.id);
  const [test] = await waitFor(() => hook.requests.filter((r) => r.headers["svc-delivery-id"] === delivery.id).at(0) && hook.requests
    .filter((r) => r.headers["svc-delivery-id"] === delivery.id), "the test delivery");
  const event = await verifyWebhook({ body: test.body, headers: test.headers, jwks: jwksUrl });
  assert.equal(event.type, "webhook.test");
  assert.equal(event.id, test.headers["svc-event-id"]);
  assert.equal(event.data.webhookId, endpoint.id);

  // A real event: a recorder creates a session, its session.created is delivered and verified.
  const created = await ingest().ingest.sessions.upsert(unique("ts-hook"), { label: "Webhook test" });
  const real = await waitFor(() => hook.requests.find((r) => r.body.includes(created.id)), "the session.created delivery");
  const createdEvent = await verifyWebhook({ body: new Uint8Array(real.body), headers: new Headers(real.headers), jwks: jwksUrl });
  assert.equal(createdEvent.type, "session.created");
  assert.equal(createdEvent.data.sessionId, created.id);

  // Refusals.
  const forged = Buffer.from(test.body);
  forged[forged.length - 2] ^= 1;
  await assert.rejects(verifyWebhook({ body: forged, headers: test.headers, jwks: jwksUrl }), InvalidSignature);
  const signedAt = Number(/t=(\d+)/.exec(test.headers["svc-signature"])[1]);
  await assert.rejects(verifyWebhook({ body: test.body, headers: test.headers, jwks: jwksUrl, now: signedAt + 301 }),
                       TimestampOutsideTolerance);
  assert.ok(await verifyWebhook({ body: test.body, headers: test.headers, jwks: jwksUrl, now: signedAt + 299 }));
  const keySet = new KeySet(jwksUrl, { minRefreshSeconds: 0 });
  const unknown = { ...test.headers, "svc-signature": test.headers["svc-signature"].replace(/kid=[^,]+/, "kid=key_unknown") };
  await assert.rejects(verifyWebhook({ body: test.body, headers: unknown, jwks: keySet }), UnknownKeyId);
  assert.equal(keySet.fetches, 1);
  await assert.rejects(verifyWebhook({ body: test.body, headers: unknown, jwks: keySet }), UnknownKeyId);
  assert.equal(keySet.fetches, 2, "an unknown kid fetches the key set again");
  const published = await (await fetch(jwksUrl)).json();
  const renamedKeys = { keys: published.keys.map((k) => ({ ...k, kid: `${k.kid}-other` })) };
  await assert.rejects(verifyWebhook({ body: test.body, headers: test.headers, jwks: renamedKeys }), UnknownKeyId);
  assert.ok(await verifyWebhook({ body: test.body, headers: test.headers, jwks: published }));
  const { ["svc-signature"]: _, ...unsigned } = test.headers;
  await assert.rejects(verifyWebhook({ body: test.body, headers: unsigned, jwks: published }), MissingSignature);

  // Deliveries: read, listed, an event's replayed (same event, new delivery), recovered.
  await waitFor(async () => (await connect.deliveries.get(delivery.id)).status === "succeeded", "the test delivery to succeed");
  const read = await connect.deliveries.get(delivery.id);
  assert.equal(read.attempts.length, 1);
  const listed = await connect.deliveries.list({ endpointId: endpoint.id }).toArray();
  assert.ok(listed.some((d) => d.id === delivery.id));
  const byEvent = { endpointId: endpoint.id, kind: "event", eventId: createdEvent.id };
  const original = await waitFor(async () => (await connect.deliveries.list(byEvent).toArray())
    .find((d) => d.status === "succeeded"), "the session.created delivery to succeed");
  const replay = await connect.deliveries.replay(original.id);
  assert.notEqual(replay.id, original.id);
  const replayed = await waitFor(() => hook.requests.find((r) => r.headers["svc-delivery-id"] === replay.id), "the replay");
  assert.equal(replayed.headers["svc-event-id"], createdEvent.id);
  assert.ok(await verifyWebhook({ body: replayed.body, headers: replayed.headers, jwks: jwksUrl }));
  const recovery = await connect.webhooks.recover(endpoint.id, { since: new Date(Date.now() - 3600_000) });
  assert.equal(typeof recovery.queued, "number");

  // Standard Webhooks signing, its secret rotated; then the endpoint deleted.
  await connect.webhooks.update(endpoint.id, { signing: "standard-webhooks" });
  const rotated = await connect.webhooks.rotateSecret(endpoint.id, { graceSeconds: 0 });
  assert.match(rotated.signingSecret ?? "", /^whsec_/);
  await connect.webhooks.delete(endpoint.id);
  await assert.rejects(connect.webhooks.get(endpoint.id), NotFound);
});
