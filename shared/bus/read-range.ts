import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  type Consumer,
  type ConsumerConfig,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { nanos, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
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

/**
 * A read's consumer outlives a reader that died before deleting it by this much: the server then
 * drops it. (The library's ordered consumers linger five minutes, one per read.)
 */
const ABANDONED_READER_MS = 30_000;

const managers = new WeakMap<JetStreamClient, Promise<JetStreamManager>>();

/** The manager of a reads client (see readsClient), made once per client. */
export function readsManager(reads: JetStreamClient): Promise<JetStreamManager> {
  let manager = managers.get(reads);
  if (!manager) managers.set(reads, (manager = reads.jetstreamManager(false)));
  return manager;
}

/** A read's consumer, how many messages it had to deliver when made, and its removal. */
export interface Reader {
  consumer: Consumer;
  pending: number;
  close: () => void;
}

/**
 * One read's own consumer, created with a single request whose answer says how many messages match
 * (the library's ordered consumer asks for the stream's info first, and is left on the server for
 * five minutes). `close` deletes it, without waiting.
 */
export async function openReader(
  reads: JetStreamClient,
  stream: string,
  config: Pick<ConsumerConfig, "filter_subject" | "deliver_policy" | "opt_start_seq">,
): Promise<Reader> {
  const jsm = await readsManager(reads);
  const info = await jsm.consumers.add(stream, {
    ...config,
    ack_policy: AckPolicy.None,
    mem_storage: true,
    num_replicas: 1,
    inactive_threshold: nanos(ABANDONED_READER_MS),
  });
  const close = (): void => void jsm.consumers.delete(stream, info.name).catch(() => undefined);
  return { consumer: reads.consumers.getConsumerFromInfo(info), pending: info.num_pending, close };
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

/** Where a read has got to, and whether it is done. */
class Cursor {
  next: number;
  private delivered = 0;
  /** For `pending`: what the current consumer has left to deliver (unknown until it exists). */
  private left = Number.POSITIVE_INFINITY;

  constructor(
    private readonly end: RangeQuery["end"],
    from: number,
  ) {
    this.next = from;
  }

  get done(): boolean {
    const { end } = this;
    if (end === "pending") return this.left <= 0;
    return "count" in end ? this.delivered >= end.count : this.next > end.untilSeq;
  }

  /** How many messages the next pull asks for. */
  get wanted(): number {
    const { end } = this;
    if (end === "pending") return Math.min(BATCH, this.left);
    return "count" in end ? Math.min(BATCH, end.count - this.delivered) : BATCH;
  }

  /** A fresh consumer counted this many messages from `next` on. */
  counted(pending: number): void {
    if (this.end === "pending") this.left = pending;
  }

  advance(seq: number): void {
    this.delivered += 1;
    this.left -= 1;
    this.next = seq + 1;
  }
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
  const cursor = new Cursor(query.end, query.fromSeq);
  let lastProgress = deps.clock.now();
  for (let failures = 0; !cursor.done;) {
    let close: (() => void) | undefined;
    try {
      const reader = await openReader(deps.reads, query.stream, {
        filter_subject: query.filter,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: cursor.next,
      });
      close = reader.close;
      const { consumer } = reader;
      cursor.counted(reader.pending);
      while (!cursor.done) {
        const batch = await consumer.fetch({ max_messages: cursor.wanted, expires: STALL_MS });
        let got = 0;
        for await (const msg of batch) {
          got += 1;
          cursor.advance(msg.seq);
          yield { seq: msg.seq, data: msg.data, ...(msg.headers ? { headers: msg.headers } : {}) };
          if (cursor.done) return;
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
    } finally {
      close?.();
    }
  }
}

/**
 * The latest message of every subject matching `filter` (a KV bucket's entries, a deleted key as
 * its delete marker), through one consumer, a page of BATCH messages per request rather than a
 * request per key. Ends after the count the consumer was created with; a subject rewritten during
 * the read is delivered once, at whichever revision comes. A page that brings nothing for STALL_MS
 * fails the read (BUS_UNAVAILABLE): callers read again rather than wait.
 */
export async function* readLatest(
  reads: JetStreamClient,
  stream: string,
  filter: string,
): AsyncGenerator<RangeMessage & { subject: string }> {
  const reader = await openReader(reads, stream, {
    filter_subject: filter,
    deliver_policy: DeliverPolicy.LastPerSubject,
  });
  yield* drainReader(reader, `reading ${filter} from ${stream}`);
}

/**
 * Every message `reader` was made with, a page of BATCH messages per request; closes it at the end.
 * A page that brings nothing for STALL_MS fails the read (BUS_UNAVAILABLE, `what` in the message).
 */
export async function* drainReader(
  reader: Reader,
  what: string,
): AsyncGenerator<RangeMessage & { subject: string }> {
  try {
    let left = reader.pending;
    while (left > 0) {
      const batch = await reader.consumer.fetch({ max_messages: Math.min(BATCH, left), expires: STALL_MS });
      const before = left;
      for await (const msg of batch) {
        left -= 1;
        yield {
          subject: msg.subject,
          seq: msg.seq,
          data: msg.data,
          ...(msg.headers ? { headers: msg.headers } : {}),
        };
        if (left === 0) break;
      }
      if (left === before) throw new AgentError("BUS_UNAVAILABLE", `${what}: nothing within ${STALL_MS} ms`);
    }
  } finally {
    reader.close();
  }
}
