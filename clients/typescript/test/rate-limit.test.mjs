// Retries against a live server whose rate limit is 3 requests per 5-second window: a GET waits
// out `429 rate_limited` as long as its Retry-After says (never less) and succeeds; without the
// budget to wait, the 429 is thrown at once as RateLimited with its retryAfter.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Connect, RateLimited } from "connect-client";
import { live } from "../testing/live.mjs";

/** Waits for a window with at least 3 s to run; the requests left in it (one is spent asking). */
async function freshWindow() {
  for (;;) {
    const response = await fetch(`${live.limitedUrl}/api/v1/webhooks`, { headers: { Authorization: `Bearer ${live.limitedKey}` } });
    await response.arrayBuffer();
    const reset = Number(response.headers.get("RateLimit-Reset") ?? response.headers.get("Retry-After"));
    if (response.status === 200 && reset >= 3) return Number(response.headers.get("RateLimit-Remaining"));
    await new Promise((resolve) => setTimeout(resolve, reset * 1000 + 200));
  }
}

function recording() {
  const answers = [];
  const recorder = async (input, init) => {
    const response = await fetch(input, init);
    answers.push({ at: performance.now(), status: response.status, retryAfter: response.headers.get("Retry-After") });
    return response;
  };
  return { answers, fetch: recorder };
}

test("GETs wait out 429 as long as Retry-After says, then succeed", async () => {
  const ids = live.sessionIds;
  await freshWindow();
  const recorded = recording();
  const client = new Connect({ baseUrl: live.limitedUrl, apiKey: live.limitedKey, etagCacheBytes: 0, fetch: recorded.fetch,
                               retry: { maxRetries: 5, maxRetryWaitMs: 30_000 } });
  for (let i = 0; i < 5; i++) assert.equal((await client.sessions.get(ids[0])).id, ids[0]);
  const statuses = recorded.answers.map((a) => a.status);
  assert.equal(statuses.filter((s) => s === 200).length, 5, statuses.join(","));
  assert.ok(statuses.includes(429), statuses.join(","));
  recorded.answers.forEach((answer, i) => {
    if (answer.status !== 429) return;
    assert.ok(answer.retryAfter !== null);
    const next = recorded.answers[i + 1];
    assert.ok(next.at - answer.at >= Number(answer.retryAfter) * 1000 * 0.95, "waited as asked, never less");
  });
});

test("without the budget to wait, the 429 is RateLimited with its retryAfter", async () => {
  await freshWindow();
  for (const retry of [{ maxRetries: 0 }, { maxRetryWaitMs: 100 }]) {
    const recorded = recording();
    const client = new Connect({ baseUrl: live.limitedUrl, apiKey: live.limitedKey, etagCacheBytes: 0, fetch: recorded.fetch, retry });
    let refused;
    for (let i = 0; i < 10 && !refused; i++) {
      try { await client.webhooks.list().page(); } catch (error) { refused = error; }
    }
    assert.ok(refused instanceof RateLimited, String(refused));
    assert.equal(refused.status, 429);
    assert.equal(refused.code, "rate_limited");
    assert.ok(refused.retryAfter > 0 && refused.retryAfter <= 5, String(refused.retryAfter));
    assert.match(refused.requestId, /.+/);
    assert.equal(recorded.answers.at(-1).status, 429);
    assert.equal(recorded.answers.filter((a) => a.status === 429).length, 1, "not retried");
  }
});
