import type { Msg, MsgHdrs, NatsConnection } from "@nats-io/transport-node";
import type { z } from "zod";
import type { Clock } from "../runtime/clock.js";
import { AgentError, type ErrorCode } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { servicePollDelay } from "../tools/backoff.js";
import { decode, encode } from "./codec.js";
import { ReplyError, ReplyInbox } from "./reply-inbox.js";

/** The server's own answer that no subscription exists for a request's subject (not a timeout). */
export function isNoResponders(err: unknown): boolean {
  return err instanceof ReplyError && err.reason === "no-responders";
}

export interface RequestOptions {
  timeoutMs: number;
  /** What nobody answering means here (a missing tool service, no supervisor running). */
  unavailable?: ErrorCode;
  timeout?: ErrorCode;
  /** Wait for a service when nobody serves the subject yet, instead of failing at once. */
  wait?: ServiceWait | undefined;
  /** Sent with the request (a `traceparent`, see traceHeaders). */
  headers?: MsgHdrs | undefined;
}

/**
 * How a caller waits for a service nobody serves yet (one starting, restarting, or reconnecting
 * after the NATS server did): it asks again with backoff, up to once a second, for `waitMs` from
 * the first failure. The server's "no responders" means no service received the request, so
 * asking again runs nothing twice.
 */
export interface ServiceWait {
  waitMs: number;
  clock: Clock;
  random: Random;
  /** Told once per request, when it begins to wait. */
  onWait?: () => void;
  /**
   * The request may be sent twice (a read, or a write whose second copy is answered as the first,
   * such as a named run's submit): it is asked again, within the wait, also when the connection
   * dropped before its reply came (a NATS server restarting). Others fail then: their outcome is
   * unknown.
   */
  repeatable?: boolean;
  /**
   * Told each time a repeatable request is sent again after its connection dropped before the
   * reply: the copy sent before may have been carried out (see askUntilDecided).
   */
  onResend?: () => void;
}

/** Whether a failed request is asked again while it waits for a service. */
function askAgain(err: unknown, wait: ServiceWait): boolean {
  return (
    isNoResponders(err) ||
    (wait.repeatable === true && err instanceof ReplyError && err.reason === "disconnected")
  );
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
  const { wait } = options;
  const sent = sendOptions(options);
  // The wait counts from the first failure, not the first ask: a read whose reply a restart lost
  // after a long wait for it (a model's turn) is asked again all the same.
  let since: number | undefined;
  for (let asked = 0; ; asked++) {
    let msg: Msg;
    try {
      msg = await ReplyInbox.of(nc).request(subject, data, sent);
    } catch (err) {
      if (wait && wait.waitMs > 0) since ??= wait.clock.now();
      const left =
        wait && since !== undefined && askAgain(err, wait) ? since + wait.waitMs - wait.clock.now() : 0;
      if (!wait || left <= 0) {
        // How long it waited, measured here (not the wait it was given): a caller's log shows it.
        const waited =
          wait && since !== undefined && asked > 0
            ? { asks: asked + 1, ms: wait.clock.now() - since }
            : undefined;
        throw requestFailure(err, subject, options, waited);
      }
      if (!isNoResponders(err)) wait.onResend?.();
      if (asked === 0) wait.onWait?.();
      await wait.clock.sleep(Math.min(left, servicePollDelay(asked, wait.random)));
      continue;
    }
    return decode(reply, msg.data);
  }
}

function sendOptions(options: RequestOptions): { timeoutMs: number; headers?: MsgHdrs } {
  return options.headers
    ? { timeoutMs: options.timeoutMs, headers: options.headers }
    : { timeoutMs: options.timeoutMs };
}

/** A transport failure as an AgentError with the caller's codes. */
function requestFailure(
  err: unknown,
  subject: string,
  options: RequestOptions,
  waited?: { asks: number; ms: number },
): AgentError {
  if (!(err instanceof ReplyError))
    return new AgentError("BUS_UNAVAILABLE", `request on '${subject}' failed: ${String(err)}`, {
      cause: err,
    });
  switch (err.reason) {
    case "no-responders": {
      const after = waited ? ` (asked ${waited.asks} times over ${waited.ms} ms)` : "";
      return new AgentError(
        options.unavailable ?? "BUS_UNAVAILABLE",
        `nobody is serving '${subject}'${after}`,
        { cause: err },
      );
    }
    case "timeout":
      return new AgentError(
        options.timeout ?? "BUS_UNAVAILABLE",
        `no reply on '${subject}' within ${options.timeoutMs} ms`,
        { cause: err },
      );
    case "disconnected":
      // A reply sent while this connection was away is gone for good (the inbox had no interest on
      // the server that routed it): give up at the disconnect instead of waiting out the timeout.
      return new AgentError(
        options.timeout ?? "BUS_UNAVAILABLE",
        `the connection dropped while waiting for a reply on '${subject}': the outcome is unknown`,
        { cause: err },
      );
  }
}
