/** `client.webhooks`: endpoints (create, read, update, delete), a test request, replay, recovery, secret rotation. */
import type { RequestOptions } from "../http.js";
import type { Paginator } from "../pagination.js";
import { APIResource, json, nothing, seg, timestamp } from "../resource.js";
import type { Delivery, Recovery, Webhook, WebhookCreate, WebhookUpdate } from "../types.js";

const PATH = "/api/v1/webhooks";

export interface RecoverParams {
  since: Date | string;
  until?: Date | string;
}

export class Webhooks extends APIResource {
  list(params: { limit?: number } = {}, options?: RequestOptions): Paginator<Webhook> {
    return this.paginate({ path: PATH, query: { limit: params.limit } }, null, options);
  }

  /** `signing: "standard-webhooks"`: the result's `signingSecret` (shown this once). */
  create(body: WebhookCreate, options?: RequestOptions): Promise<Webhook> {
    return this.send({ method: "POST", path: PATH, body, parse: json<Webhook>() }, options);
  }

  get(webhookId: string, options?: RequestOptions): Promise<Webhook> {
    return this.send({ method: "GET", path: `${PATH}/${seg(webhookId)}`, parse: json<Webhook>() }, options);
  }

  /** Only the fields passed change. */
  update(webhookId: string, body: WebhookUpdate, options?: RequestOptions): Promise<Webhook> {
    return this.send({ method: "PATCH", path: `${PATH}/${seg(webhookId)}`, body, parse: json<Webhook>() }, options);
  }

  delete(webhookId: string, options?: RequestOptions): Promise<void> {
    return this.send({ method: "DELETE", path: `${PATH}/${seg(webhookId)}`, parse: nothing }, options);
  }

  /** Sends one signed test request (`webhook.test`); the test delivery. */
  test(webhookId: string, options?: RequestOptions): Promise<Delivery> {
    return this.send({ method: "POST", path: `${PATH}/${seg(webhookId)}/test`, parse: json<Delivery>() }, options);
  }

  /** Same as `deliveries.replay`. */
  replay(deliveryId: string, options?: RequestOptions): Promise<Delivery> {
    return this.send({ method: "POST", path: `/api/v1/webhook-deliveries/${seg(deliveryId)}/replay`, parse: json<Delivery>() }, options);
  }

  /** Queue again what this endpoint missed in the window (`queued`; `more` when the server's cap left some: call again). */
  recover(webhookId: string, params: RecoverParams, options?: RequestOptions): Promise<Recovery> {
    const body = { since: timestamp(params.since), ...(params.until !== undefined ? { until: timestamp(params.until) } : {}) };
    return this.send({ method: "POST", path: `${PATH}/${seg(webhookId)}/recover`, body, parse: json<Recovery>() }, options);
  }

  /** A new Standard Webhooks secret (`signingSecret`, shown this once); the old one signs beside it for `graceSeconds`. */
  rotateSecret(webhookId: string, params: { graceSeconds?: number } = {}, options?: RequestOptions): Promise<Webhook> {
    return this.send({ method: "POST", path: `${PATH}/${seg(webhookId)}/rotate-secret`, body: { ...params }, parse: json<Webhook>() }, options);
  }
}
