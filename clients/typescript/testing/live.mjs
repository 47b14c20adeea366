// What the node tests share: the live servers and keys tests/client_ts/test_typescript_client.py
// started and seeded (in the environment), a client factory, and polling.
import assert from "node:assert/strict";
import { Connect } from "connect-client";

export function need(name) {
  const value = process.env[name];
  assert.ok(value, `${name} is not set: run these tests through tests/client_ts/test_typescript_client.py`);
  return value;
}

export const live = {
  get baseUrl() { return need("CONNECT_TEST_BASE_URL"); },
  get key() { return need("CONNECT_TEST_KEY"); },
  get readKey() { return need("CONNECT_TEST_READ_KEY"); },
  get ingestKey() { return need("CONNECT_TEST_INGEST_KEY"); },
  get forbiddenKey() { return need("CONNECT_TEST_FORBIDDEN_KEY"); },
  get sessionIds() { return need("CONNECT_TEST_SESSION_IDS").split(","); },
  get transcriptSession() { return need("CONNECT_TEST_TRANSCRIPT_SESSION"); },
  get limitedUrl() { return need("CONNECT_TEST_LIMITED_URL"); },
  get limitedKey() { return need("CONNECT_TEST_LIMITED_KEY"); },
};

export function client(options = {}) {
  return new Connect({ baseUrl: live.baseUrl, apiKey: live.key, ...options });
}

export function ingest(options = {}) {
  return new Connect({ baseUrl: live.baseUrl, ingestKey: live.ingestKey, ...options });
}

/** Polls `predicate` until it is truthy; generous: the servers share a busy machine. */
export async function waitFor(predicate, what, timeoutMs = 120_000, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

export function unique(prefix) {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
