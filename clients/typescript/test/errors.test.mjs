// Error answers map to one class per wire code, carrying status, code, requestId and detail;
// the stream ends on 401/403 with its typed error; an abort signal ends a call.
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import {
  APITimeoutError, Connect, ConnectError, Forbidden, InsufficientScope, InvalidRequest, NotFound, Unauthorized,
} from "connect-client";
import { client, live } from "../testing/live.mjs";

function typed(cls, status, code) {
  return (error) => {
    assert.ok(error instanceof cls, `${error?.name}: ${error?.message}`);
    assert.ok(error instanceof ConnectError);
    assert.equal(error.status, status);
    assert.equal(error.code, code);
    assert.match(error.requestId ?? "", /.+/, "the request id");
    assert.equal(error.body.error, code);
    return true;
  };
}

test("404 → NotFound", async () => {
  await assert.rejects(client().sessions.get("ses_doesnotexist"), typed(NotFound, 404, "not_found"));
});

test("401 → Unauthorized, with a detail", async () => {
  const stranger = new Connect({ baseUrl: live.baseUrl, apiKey: "svc_not_a_real_key" });
  await assert.rejects(stranger.sessions.list().page(), (error) => {
    typed(Unauthorized, 401, "unauthorized")(error);
    assert.match(error.detail ?? "", /.+/);
    return true;
  });
});

test("403 → InsufficientScope (a scope missing) and Forbidden (a deactivated member)", async () => {
  const reader = new Connect({ baseUrl: live.baseUrl, apiKey: live.readKey });
  await assert.rejects(reader.webhooks.list().page(), (error) => {
    typed(InsufficientScope, 403, "insufficient_scope")(error);
    assert.ok(error.requiredScopes.includes("svc:webhooks:read"), JSON.stringify(error.body));
    return true;
  });
  const gone = new Connect({ baseUrl: live.baseUrl, apiKey: live.forbiddenKey });
  await assert.rejects(gone.sessions.list().page(), typed(Forbidden, 403, "forbidden"));
});

test("400 → InvalidRequest naming the parameter", async () => {
  await assert.rejects(client().sessions.list({ limit: 1000 }).page(), (error) => {
    typed(InvalidRequest, 400, "invalid_request")(error);
    assert.match(error.detail, /limit/);
    return true;
  });
});

test("the stream ends on 401 and on 403 with the typed error", async () => {
  const stranger = new Connect({ baseUrl: live.baseUrl, apiKey: "svc_not_a_real_key" });
  await assert.rejects((async () => { for await (const _ of stranger.events.stream()) break; })(), Unauthorized);
  const reader = new Connect({ baseUrl: live.baseUrl, apiKey: live.ingestKey });
  const filters = [{ type: "session.created" }];
  await assert.rejects((async () => { for await (const _ of reader.events.stream({ filters })) break; })(), InsufficientScope);
});

test("an AbortSignal ends a call", async () => {
  const controller = new AbortController();
  controller.abort(new Error("stop"));
  await assert.rejects(client().sessions.get(live.sessionIds[0], { signal: controller.signal }), /stop/);
});

test("a timeout is APITimeoutError after the retries a GET is allowed; a POST is not retried", async (t) => {
  // A server that accepts connections and never answers; the attempts are counted where the
  // client sends them (its `fetch`), since fetch may open a connection before it is used.
  const sockets = [];
  const silent = net.createServer((socket) => sockets.push(socket));
  await new Promise((resolve) => silent.listen(0, "127.0.0.1", resolve));
  t.after(() => { sockets.forEach((s) => s.destroy()); silent.close(); });
  const attempts = [];
  const counting = (input, init) => { attempts.push(init.method); return fetch(input, init); };
  const connect = new Connect({ baseUrl: `http://127.0.0.1:${silent.address().port}`, apiKey: "svc_x", fetch: counting,
                                timeout: 500, retry: { maxRetries: 2, baseDelayMs: 10 } });
  await assert.rejects(connect.sessions.get("ses_1"), APITimeoutError);
  assert.deepEqual(attempts, ["GET", "GET", "GET"], "the first attempt and two retries");
  await assert.rejects(connect.webhooks.create({ name: "x", url: "https://example.com", filters: [{ type: "session.created" }] }),
                       APITimeoutError);
  assert.deepEqual(attempts.slice(3), ["POST"], "a write without an Idempotency-Key is sent once");
});
