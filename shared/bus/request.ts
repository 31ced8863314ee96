import { NoRespondersError, RequestError, TimeoutError, type NatsConnection } from "@nats-io/transport-node";
import type { z } from "zod";
import { AgentError, type ErrorCode } from "../runtime/errors.js";
import { decode, encode } from "./codec.js";
import { linkOf } from "./link.js";

/** The server's own answer that no subscription exists for a request's subject (not a timeout). */
export function isNoResponders(err: unknown): boolean {
  return err instanceof NoRespondersError || (err instanceof RequestError && err.isNoResponders());
}

export interface RequestOptions {
  timeoutMs: number;
  /** What nobody answering means here (a missing tool service, no supervisor running). */
  unavailable?: ErrorCode;
  timeout?: ErrorCode;
}

/**
 * One validated request/reply: the request is checked before it leaves, the reply before it is
 * believed. Transport failures become AgentErrors with stable codes: nobody listening is
 * `unavailable` (retryable by default), no answer in time is `timeout`.
 */
export async function requestJson<Q extends z.ZodType, R extends z.ZodType>(
  nc: NatsConnection,
  subject: string,
  request: { schema: Q; value: z.input<Q> },
  reply: R,
  options: RequestOptions,
): Promise<z.output<R>> {
  const data = encode(request.schema, request.value);
  let forget = (): void => undefined;
  try {
    // A reply sent while this connection was away is gone for good (the inbox had no interest on
    // the server that routed it): give up at the disconnect instead of waiting out the timeout.
    const lost = new Promise<never>((_, reject) => {
      forget = linkOf(nc).onDisconnect(() =>
        reject(
          new AgentError(
            options.timeout ?? "BUS_UNAVAILABLE",
            `the connection dropped while waiting for a reply on '${subject}': the outcome is unknown`,
          ),
        ),
      );
    });
    const msg = await Promise.race([nc.request(subject, data, { timeout: options.timeoutMs }), lost]);
    return decode(reply, msg.data);
  } catch (err) {
    if (err instanceof AgentError) throw err;
    if (isNoResponders(err)) {
      throw new AgentError(options.unavailable ?? "BUS_UNAVAILABLE", `nobody is serving '${subject}'`, {
        cause: err,
      });
    }
    if (err instanceof TimeoutError) {
      throw new AgentError(
        options.timeout ?? "BUS_UNAVAILABLE",
        `no reply on '${subject}' within ${options.timeoutMs} ms`,
        { cause: err },
      );
    }
    throw new AgentError("BUS_UNAVAILABLE", `request on '${subject}' failed: ${String(err)}`, {
      cause: err,
    });
  } finally {
    forget();
  }
}
