// The checked-in wire types equal what openapi-typescript generates from the live server's
// /openapi.json: the API changed and the types did not when this fails.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";
import { OUTPUT, generate } from "../scripts/generate.mjs";
import { live } from "../testing/live.mjs";

test("src/generated/openapi.ts is what the served /openapi.json generates", async () => {
  // The document states some of the server's settings (the stream's ping interval, …): it is
  // read from the server that runs with the defaults (the main one pings every second for the
  // stream tests; the other differs only in its rate limit, which the document does not state).
  const response = await fetch(`${live.limitedUrl}/openapi.json`);
  assert.equal(response.status, 200);
  const document = await response.json();
  // The test server also mounts the repository's test-only views (tests/urls.py, under /test/):
  // they are not the API's.
  for (const path of Object.keys(document.paths)) if (path.startsWith("/test/")) delete document.paths[path];
  const expected = await generate(document);
  const actual = await readFile(OUTPUT, "utf8");
  assert.ok(actual === expected,
    "src/generated/openapi.ts is out of date: run `node scripts/generate.mjs <base URL>` in clients/typescript");
});
