// The README's TypeScript blocks type-check strictly against the package as a user imports
// it, and its quick start (the first block, ten lines; docs/typescript-client.md shows the same)
// runs against the live server and prints the seeded sessions.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import ts from "typescript";
import { live } from "../testing/live.mjs";

const run = promisify(execFile);
const PACKAGE = fileURLToPath(new URL("..", import.meta.url));
const TSC = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));
// Inside the package, so that "connect-client" resolves to it (a package may import itself by name).
const WORK = fileURLToPath(new URL(`../.readme-check/${process.pid}/`, import.meta.url));

async function blocks() {
  const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
  return [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
}

async function tsc(args) {
  try {
    return await run(process.execPath, [TSC, ...args], { cwd: PACKAGE });
  } catch (error) {
    assert.fail(`tsc ${args.join(" ")}\n${error.stdout}${error.stderr}`);
  }
}

test("the README's blocks and the typing probe pass tsc --noEmit --strict; its quick start (ten lines) runs", async (t) => {
  t.after(() => rm(WORK, { recursive: true, force: true }));
  const found = await blocks();
  assert.ok(found.length >= 3, "the README has its examples");
  assert.ok(found[0].trim().split("\n").length <= 10, "the quick start is ten lines at most");
  await mkdir(WORK, { recursive: true });
  const files = [];
  for (const [i, code] of found.entries()) {
    await writeFile(`${WORK}block${i}.ts`, i === 0 ? code : `export {};\n${code}`);
    files.push(`${WORK}block${i}.ts`);
  }
  await writeFile(`${WORK}typing-probe.ts`, await readFile(new URL("../testing/typing-probe.ts", import.meta.url), "utf8"));
  files.push(`${WORK}typing-probe.ts`);
  await tsc(["--noEmit", "--strict", "--target", "ES2022", "--module", "NodeNext", "--moduleResolution", "NodeNext",
             "--lib", "ES2022,DOM,DOM.Iterable", "--rootDir", WORK, ...files]);

  // Checked above; here only its types are stripped (no second type-check) to run it as written.
  const { outputText } = ts.transpileModule(found[0], { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } });
  await writeFile(`${WORK}quickstart.mjs`, outputText);
  const { stdout } = await run(process.execPath, [`${WORK}quickstart.mjs`], {
    env: { ...process.env, CONNECT_BASE_URL: live.baseUrl, CONNECT_API_KEY: live.key },
  });
  for (const id of live.sessionIds) assert.match(stdout, new RegExp(id), stdout);
});

test("the docs page's quick start is the README's (so the run above is its run)", async () => {
  const page = await readFile(new URL("../../../docs/typescript-client.md", import.meta.url), "utf8");
  const [pageQuickStart] = [...page.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.equal(pageQuickStart, (await blocks())[0]);
});
