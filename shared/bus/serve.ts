import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import type { z } from "zod";
import { toAgentError } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import { encode } from "./codec.js";
import { InFlight, stopServing } from "./in-flight.js";

export interface ServeOptions<R extends z.ZodType> {
  /** Replicas in one queue group share the requests. */
  queue: string;
  reply: R;
  logger: Logger;
  handle: (msg: Msg) => Promise<z.input<R>>;
  /** The structured reply for anything `handle` throws: the service answers and keeps serving. */
  onError: (err: unknown) => z.input<R>;
  /** Counts a refused request (a metric). */
  onFailure?: (subject: string) => void;
}

/** A served endpoint: its subscription, its failures so far, and how it stops. */
export type Served = Subscription & {
  failures: () => number;
  /** Takes no more requests, then settles once every request taken is answered (see stopServing). */
  stop: () => Promise<void>;
};

/**
 * A request/reply endpoint that never dies of bad input: every request gets a validated reply,
 * failures included, and a failure is logged and counted rather than thrown out of the callback.
 */
export function serve<R extends z.ZodType>(
  nc: NatsConnection,
  subject: string,
  options: ServeOptions<R>,
): Served {
  let failures = 0;
  const inFlight = new InFlight();
  const answer = (msg: Msg, value: z.input<R>): void => {
    if (msg.reply) msg.respond(encode(options.reply, value));
  };
  const sub = nc.subscribe(subject, {
    queue: options.queue,
    callback: (err, msg) => {
      if (err) {
        options.logger.error({ err, subject }, "subscription failed");
        return;
      }
      void inFlight.track(
        options
          .handle(msg)
          .then(
            (value) => answer(msg, value),
            (e: unknown) => {
              failures += 1;
              options.onFailure?.(subject);
              options.logger.warn({ err: e, subject: msg.subject }, "request refused");
              try {
                answer(msg, options.onError(e));
              } catch (encodeError) {
                options.logger.error({ err: encodeError }, "could not encode the error reply");
              }
            },
          )
          .catch((e: unknown) => options.logger.error({ err: e, subject }, "could not encode the reply")),
      );
    },
  });
  return Object.assign(sub, { failures: () => failures, stop: () => stopServing([sub], inFlight) });
}

/**
 * The error arm every request/reply contract shares: `{ schemaVersion, ok: false, error }`. With
 * `details`, the error's details go too (a breaker's refusal says when its provider is next tried).
 */
export function failureReply(
  err: unknown,
  options: { details?: boolean } = {},
): {
  schemaVersion: 1;
  ok: false;
  error: { code: string; message: string; retryable: boolean; details?: unknown };
} {
  const error = toAgentError(err);
  const details = options.details && error.details !== undefined ? { details: error.details } : {};
  return {
    schemaVersion: 1,
    ok: false,
    error: { code: error.code, message: error.message, retryable: error.retryable, ...details },
  };
}
