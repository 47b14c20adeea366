/**
 * Verifying webhook requests: `verifyWebhook({ body, headers, jwks })`.
 *
 * `Svc-Signature: t=<unix seconds>,kid=<key id>,v1=<base64url Ed25519 signature>` signs the
 * bytes `<t>.<raw body>`. `verifyWebhook` checks it with the published key of that `kid`
 * (WebCrypto Ed25519), refuses a timestamp more than `tolerance` seconds (default 300) from now,
 * and returns the typed event (`event.id` is the id to deduplicate on: it is inside the signed
 * bytes). Every failure is its own `WebhookVerificationError` subclass; answer those with a 400.
 *
 * Key sets fetched from a URL are cached per URL for `cacheSeconds` and fetched again once when
 * a `kid` is unknown (after a rotation the new key signs first), at most every
 * `minRefreshSeconds`, so a flood of made-up kids costs one fetch per interval.
 */
import {
  InvalidPayload, InvalidSignature, KeySetUnavailable, MalformedSignature, MissingSignature, TimestampOutsideTolerance,
  UnknownKeyId,
} from "./errors.js";
import type { WebhookEvent } from "./types.js";

export const SIGNATURE_HEADER = "Svc-Signature";
export const TOLERANCE_SECONDS = 300;

export interface Jwk { kty?: string; crv?: string; kid?: string; x?: string; [name: string]: unknown }
export interface Jwks { keys: Jwk[] }

function b64url(text: string): Uint8Array<ArrayBuffer> {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4);
  const binary = atob(base64);
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/** kid → key for the Ed25519 keys of a JWKS document (others are skipped). */
export async function keysFromJwks(document: Jwks): Promise<Map<string, CryptoKey>> {
  const found = new Map<string, CryptoKey>();
  for (const jwk of document?.keys ?? []) {
    if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || !jwk.kid || !jwk.x) continue;
    try {
      found.set(jwk.kid, await crypto.subtle.importKey("jwk", { kty: "OKP", crv: "Ed25519", x: jwk.x }, { name: "Ed25519" }, false, ["verify"]));
    } catch {
      // a key this runtime cannot read is as good as absent
    }
  }
  return found;
}

/** A JWKS fetched over HTTP, cached briefly, fetched again on an unknown kid. */
export class KeySet {
  keys = new Map<string, CryptoKey>();
  fetchedAt: number | null = null;
  fetches = 0;
  readonly cacheSeconds: number;
  readonly minRefreshSeconds: number;
  readonly timeout: number;
  private pending: Promise<void> | null = null;

  constructor(readonly url: string, options: { cacheSeconds?: number; minRefreshSeconds?: number; timeout?: number } = {}) {
    this.cacheSeconds = options.cacheSeconds ?? 300;
    this.minRefreshSeconds = options.minRefreshSeconds ?? 10;
    this.timeout = options.timeout ?? 5_000;
  }

  private async fetchKeys(): Promise<void> {
    try {
      const response = await fetch(this.url, { signal: AbortSignal.timeout(this.timeout), redirect: "error" });
      if (!response.ok) throw new Error(`answered ${response.status}`);
      this.keys = await keysFromJwks((await response.json()) as Jwks);
    } catch (error) {
      throw new KeySetUnavailable(`cannot read the key set at ${this.url}: ${(error as Error).message}`, { cause: error });
    }
    this.fetchedAt = performance.now();
    this.fetches += 1;
  }

  async get(kid: string): Promise<CryptoKey | undefined> {
    const age = this.fetchedAt === null ? null : (performance.now() - this.fetchedAt) / 1000;
    if (age === null || age > this.cacheSeconds || (!this.keys.has(kid) && age >= this.minRefreshSeconds)) {
      // one fetch at a time: concurrent requests wait for the same answer
      this.pending ??= this.fetchKeys().finally(() => { this.pending = null; });
      await this.pending;
    }
    return this.keys.get(kid);
  }
}

const keySets = new Map<string, KeySet>();

/** The process-wide cached key set of `url`. */
export function keySetFor(url: string): KeySet {
  let set = keySets.get(url);
  if (!set) keySets.set(url, (set = new KeySet(url)));
  return set;
}

export type HeaderBag = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderBag, name: string): string | null {
  if (headers instanceof Headers) return headers.get(name);
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted && value !== undefined) return Array.isArray(value) ? value.join(",") : value;
  }
  return null;
}

/** [t, kid, v1 signatures] of an `Svc-Signature` value. */
export function parseSignature(value: string): { timestamp: string; kid: string; signatures: string[] } {
  const fields = new Map<string, string>();
  const signatures: string[] = [];
  for (const part of value.split(",")) {
    const item = part.trim();
    const eq = item.indexOf("=");
    const name = eq < 0 ? item : item.slice(0, eq);
    const text = eq < 0 ? "" : item.slice(eq + 1);
    if (name === "v1") signatures.push(text);
    else if (name) fields.set(name, text);
  }
  const timestamp = fields.get("t") ?? "";
  const kid = fields.get("kid") ?? "";
  if (!/^\d+$/.test(timestamp) || !kid || signatures.length === 0) {
    throw new MalformedSignature("Svc-Signature must be t=<unix seconds>,kid=<key id>,v1=<signature>");
  }
  return { timestamp, kid, signatures };
}

export interface VerifyWebhookOptions {
  /** The exact bytes received, before any parsing (a string only if it is the raw body's UTF-8 text). */
  body: Uint8Array | ArrayBuffer | string;
  /** The request's headers: a `Headers`, or Node's `req.headers` (any case). */
  headers: HeaderBag;
  /** The key set: its URL (`<base URL>/.well-known/webhook-signing-keys.json`, fetched and cached), a `KeySet`, or a JWKS document. */
  jwks: string | URL | KeySet | Jwks;
  /** Seconds the signed timestamp may be from now. */
  tolerance?: number;
  /** Now, in unix seconds (for tests). */
  now?: number;
}

/** The event of a genuine webhook request, or a `WebhookVerificationError`. */
export async function verifyWebhook(options: VerifyWebhookOptions): Promise<WebhookEvent> {
  const { jwks, tolerance = TOLERANCE_SECONDS } = options;
  const raw = typeof options.body === "string" ? new TextEncoder().encode(options.body)
    : options.body instanceof Uint8Array ? options.body : new Uint8Array(options.body);
  const value = header(options.headers, SIGNATURE_HEADER);
  if (!value) throw new MissingSignature(`no ${SIGNATURE_HEADER} header`);
  const { timestamp, kid, signatures } = parseSignature(value);
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - Number(timestamp)) > tolerance) {
    throw new TimestampOutsideTolerance(`signed at ${timestamp}, more than ${tolerance} s from now`);
  }

  let key: CryptoKey | undefined;
  if (typeof jwks === "string" || jwks instanceof URL) key = await keySetFor(String(jwks)).get(kid);
  else if (jwks instanceof KeySet) key = await jwks.get(kid);
  else key = (await keysFromJwks(jwks)).get(kid);
  if (!key) throw new UnknownKeyId(`no published key has kid ${JSON.stringify(kid)}`);

  const prefix = new TextEncoder().encode(`${timestamp}.`);
  const message = new Uint8Array(prefix.length + raw.length);
  message.set(prefix);
  message.set(raw, prefix.length);
  let verified = false;
  for (const signature of signatures) {
    try {
      if (await crypto.subtle.verify({ name: "Ed25519" }, key, b64url(signature), message)) { verified = true; break; }
    } catch {
      // an undecodable signature is one that does not verify
    }
  }
  if (!verified) throw new InvalidSignature("the signature does not match the body");

  let event: unknown;
  try {
    event = JSON.parse(new TextDecoder().decode(raw));
  } catch (error) {
    throw new InvalidPayload("the body is not JSON", { cause: error });
  }
  const fields = event as Record<string, unknown> | null;
  if (!fields || typeof fields !== "object" || typeof fields["id"] !== "string" || typeof fields["type"] !== "string") {
    throw new InvalidPayload("the body is not an event object");
  }
  return event as WebhookEvent;
}
