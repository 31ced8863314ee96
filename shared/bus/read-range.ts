import { DeliverPolicy, jetstream, type JetStreamClient } from "@nats-io/jetstream";
import type { MsgHdrs, NatsConnection } from "@nats-io/transport-node";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";
import { BACKOFF, BUDGET_MS } from "./retry.js";

/** Messages per pull: one round trip for a typical run's WAL or audit trail. */
const BATCH = 256;
/** A pull that returns nothing for this long, while messages are known to be there, has stalled. */
const STALL_MS = 3_000;

/**
 * How long a read waits for JetStream to answer an API request (creating its consumer). Creating
 * one takes milliseconds, but after a server dies nats-server 2.9 keeps placing about a third of
 * new ephemeral consumers on the dead peer, and those requests never get an answer: a short
 * timeout and a new attempt beat waiting out the default 5 s each time.
 */
const READ_API_TIMEOUT_MS = 1_000;

/** The JetStream client reads use (see READ_API_TIMEOUT_MS). */
export function readsClient(nc: NatsConnection): JetStreamClient {
  return jetstream(nc, { timeout: READ_API_TIMEOUT_MS });
}

export interface RangeQuery {
  stream: string;
  /** A subject filter (wildcards allowed). */
  filter: string;
  /** The stream sequence to start at. */
  fromSeq: number;
  /**
   * Where the range ends: the stream sequence of its last message, a number of messages, or
   * `pending`: whatever matches when the read starts (the count its consumer is created with,
   * which spares asking the server where the subject ends first).
   */
  end: { untilSeq: number } | { count: number } | "pending";
}

export interface RangeMessage {
  seq: number;
  data: Uint8Array;
  headers?: MsgHdrs;
}

/**
 * Reads a range of a stream in order. A read must not fail, nor hang, while the stream's leader is
 * re-elected or this client's server dies: when a pull fails or stalls, the read starts a fresh
 * ordered consumer just after the last message it delivered, so nothing is skipped or repeated. It
 * gives up with BUS_UNAVAILABLE only after the retry budget (15 s) passes without progress.
 */
export async function* readRange(
  deps: { reads: JetStreamClient; clock: Clock; random: Random },
  query: RangeQuery,
): AsyncGenerator<RangeMessage> {
  let next = query.fromSeq;
  let delivered = 0;
  /** For `pending`: what the current consumer has left to deliver (unknown until it exists). */
  let left = Number.POSITIVE_INFINITY;
  const { end } = query;
  const done = (): boolean => {
    if (end === "pending") return left <= 0;
    return "count" in end ? delivered >= end.count : next > end.untilSeq;
  };
  let lastProgress = deps.clock.now();
  for (let failures = 0; !done();) {
    try {
      const consumer = await deps.reads.consumers.get(query.stream, {
        filter_subjects: query.filter,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: next,
      });
      if (end === "pending") {
        left = (await consumer.info(true)).num_pending;
        if (done()) return;
      }
      while (!done()) {
        const wanted = wantedNow(end, delivered, left);
        const batch = await consumer.fetch({ max_messages: wanted, expires: STALL_MS });
        let got = 0;
        for await (const msg of batch) {
          got += 1;
          delivered += 1;
          left -= 1;
          next = msg.seq + 1;
          yield { seq: msg.seq, data: msg.data, ...(msg.headers ? { headers: msg.headers } : {}) };
          if (done()) return;
        }
        if (got === 0) throw new Error(`no message from ${query.stream} within ${STALL_MS} ms`);
        failures = 0;
        lastProgress = deps.clock.now();
      }
    } catch (err) {
      if (deps.clock.now() - lastProgress >= BUDGET_MS)
        throw new AgentError(
          "BUS_UNAVAILABLE",
          `reading ${query.filter} from ${query.stream} made no progress for ${BUDGET_MS} ms`,
          { cause: err },
        );
      await deps.clock.sleep(fullJitterDelay(failures++, BACKOFF, deps.random));
    }
  }
}

/** How many messages the next pull asks for. */
function wantedNow(end: RangeQuery["end"], delivered: number, left: number): number {
  if (end === "pending") return Math.min(BATCH, left);
  return "count" in end ? Math.min(BATCH, end.count - delivered) : BATCH;
}
