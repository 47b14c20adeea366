/** `client.deliveries`: webhook deliveries (newest first), one with its attempts, and replay. */
import type { RequestOptions } from "../http.js";
import type { Paginator } from "../pagination.js";
import { APIResource, json, seg } from "../resource.js";
import type { Delivery, DeliveryWithAttempts } from "../types.js";

const PATH = "/api/v1/webhook-deliveries";

export interface DeliveryListParams {
  endpointId?: string;
  status?: Delivery["status"];
  eventType?: string;
  eventId?: string;
  kind?: "event" | "test";
  limit?: number;
}

export class Deliveries extends APIResource {
  /** Newest first. */
  list(params: DeliveryListParams = {}, options?: RequestOptions): Paginator<Delivery> {
    return this.paginate({ path: PATH, query: { ...params } }, null, options);
  }

  /** One delivery, with its attempts. */
  get(deliveryId: string, options?: RequestOptions): Promise<DeliveryWithAttempts> {
    return this.send({ method: "GET", path: `${PATH}/${seg(deliveryId)}`, parse: json<DeliveryWithAttempts>() }, options);
  }

  /** A new delivery of the same event (terminal deliveries only). */
  replay(deliveryId: string, options?: RequestOptions): Promise<Delivery> {
    return this.send({ method: "POST", path: `${PATH}/${seg(deliveryId)}/replay`, parse: json<Delivery>() }, options);
  }
}
