// A TCP proxy in front of the live server, so a test can cut a client's connection mid-stream
// (both sides destroyed: the client sees a reset, the server a closed socket) and read what each
// connection sent, or silence it. `retry` (ms) is injected as an SSE `retry:` field at the start of the first
// response's body, as a server would send it.
import net from "node:net";

export class Proxy {
  connections = [];

  static async start(target, { retry } = {}) {
    const proxy = new Proxy(target, retry);
    await new Promise((resolve) => proxy.server.listen(0, "127.0.0.1", resolve));
    return proxy;
  }

  constructor(target, retry) {
    const { hostname, port } = new URL(target);
    this.server = net.createServer((client) => {
      const record = { request: "", client, openedAt: performance.now(), upstream: net.connect(Number(port), hostname) };
      const inject = retry !== undefined && this.connections.length === 0;
      this.connections.push(record);
      let head = "";
      let headDone = !inject;
      client.on("data", (data) => { record.request += data.toString("latin1"); record.upstream.write(data); });
      record.upstream.on("data", (data) => {
        if (record.silenced) return;
        if (headDone) { client.write(data); return; }
        head += data.toString("latin1");
        const end = head.indexOf("\r\n\r\n");
        if (end < 0) return;
        headDone = true;
        const field = `retry: ${retry}\n\n`;
        const chunked = /^transfer-encoding:\s*chunked/im.test(head.slice(0, end));
        client.write(Buffer.from(head.slice(0, end + 4), "latin1"));
        client.write(chunked ? `${Buffer.byteLength(field).toString(16)}\r\n${field}\r\n` : field);
        client.write(Buffer.from(head.slice(end + 4), "latin1"));
      });
      const close = () => { client.destroy(); record.upstream.destroy(); };
      for (const socket of [client, record.upstream]) { socket.on("error", close); socket.on("close", close); }
    });
  }

  get url() { return `http://127.0.0.1:${this.server.address().port}`; }

  /** From now on the open connections pass nothing from the server on (a peer gone silent, no FIN or RST). */
  silence() {
    for (const record of this.connections) record.silenced = true;
  }

  /** Drops every open connection. */
  cut() {
    for (const { client, upstream } of this.connections) { client.resetAndDestroy?.() ?? client.destroy(); upstream.destroy(); }
  }

  close() {
    this.cut();
    return new Promise((resolve) => this.server.close(resolve));
  }
}
