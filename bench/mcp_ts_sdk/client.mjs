// The official TypeScript MCP SDK client (@modelcontextprotocol/sdk, pinned in package-lock.json)
// against Connect's /mcp: it connects (the SDK's own initialize and version negotiation), lists
// the resource templates, reads a session's transcript resource and follows the continuation
// URIs (`_meta.nextUri`) until the transcript is whole, then prints one JSON line with what it got.
//
//   CONNECT_URL=http://127.0.0.1:8000 CONNECT_KEY=svc_… SESSION_ID=… node client.mjs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const base = process.env.CONNECT_URL;
const key = process.env.CONNECT_KEY;
const sessionId = process.env.SESSION_ID;
if (!base || !key || !sessionId) {
  console.error("set CONNECT_URL, CONNECT_KEY and SESSION_ID");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL("/mcp", base), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "connect-ts-sdk-check", version: "1.0.0" });
await client.connect(transport);

const templates = await client.listResourceTemplates();
let uri = `connect://sessions/${sessionId}/transcript`;
const pages = [];
const segments = [];
while (uri) {
  const read = await client.readResource({ uri });
  const [content] = read.contents;
  const page = JSON.parse(content.text);
  segments.push(...page.transcript);
  pages.push({ uri: content.uri, mimeType: content.mimeType, segments: page.transcript.length });
  uri = content._meta?.nextUri;
}
console.log(JSON.stringify({
  protocolVersion: transport.protocolVersion,
  server: client.getServerVersion(),
  templates: templates.resourceTemplates.map((t) => t.uriTemplate),
  pages,
  segmentIds: segments.map((s) => s.id),
}));
await client.close();
