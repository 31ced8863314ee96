import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { ToolCallReply } from "../contracts/tool.js";
import type { Clock } from "../runtime/clock.js";
import { sha256 } from "../runtime/hash.js";
import type { Random } from "../runtime/random.js";
import { AckPublisher } from "./ack-publisher.js";
import { decode } from "./codec.js";
import { withBusRetry } from "./retry.js";
import { kvSubject, type Subjects } from "./subjects.js";
import { isWrongLastSequence } from "./run-log.js";

/** What the idempotency bucket holds per key: a claim while the tool runs, then its reply. */
export const IdempotencyRecord = z.discriminatedUnion("status", [
  z.object({
    status: z.literal("running"),
    idempotencyKey: z.string(),
    since: z.number(),
    /** Which call holds the claim: a call reading its own claim back (after a lost ack) knows it. */
    claimId: z.string().optional(),
  }),
  z.object({ status: z.literal("done"), idempotencyKey: z.string(), reply: ToolCallReply }),
]);
export type IdempotencyRecord = z.infer<typeof IdempotencyRecord>;

/** KV keys allow a narrow alphabet; the idempotency key itself is kept in the record. */
export function idempotencyBucketKey(tool: string, idempotencyKey: string): string {
  return `${tool}.${sha256(idempotencyKey)}`;
}

/** What writing a key's first record needs: the connection, the bucket, and a clock to retry by. */
export interface IdempotencyBucketDeps {
  nc: NatsConnection;
  subjects: Subjects;
  /** The `agents-idempotency` bucket. */
  idempotency: KV;
  clock: Clock;
  random: Random;
}

/** A key's first record, written, or the record another caller wrote first; with its revision. */
export type CreatedOrHeld =
  { created: true; revision: number } | { created: false; record: IdempotencyRecord; revision: number };

/**
 * Creates the key's record (only one caller can), or reads the record another caller created. It
 * rides out a JetStream outage (a server restarting, a leader election), like every write to the
 * bucket.
 */
export async function createOrRead(
  deps: IdempotencyBucketDeps,
  key: string,
  value: Uint8Array,
): Promise<"created" | IdempotencyRecord> {
  const entry = await createOrReadEntry(deps, key, value);
  return entry.created ? "created" : entry.record;
}

/**
 * As createOrRead, with the revision of the record written or read (to write over it by
 * compare-and-set); `budgetMs`: how long it rides out an outage (15 s by default).
 */
export function createOrReadEntry(
  deps: IdempotencyBucketDeps,
  key: string,
  value: Uint8Array,
  budgetMs?: number,
): Promise<CreatedOrHeld> {
  return withBusRetry(
    `the idempotency record ${key}`,
    deps,
    () => create(deps, key, value),
    undefined,
    budgetMs,
  );
}

/**
 * A KV create, on every call's path: one publish that expects the key to have no message yet, sent
 * through the connection's AckPublisher (the KV client's own create goes through a request per
 * call: 0.34 ms a call in this service one run at a time, against 0.25 so). Returns the value the
 * key holds when it holds one; a key whose value was deleted (a claim freed for a retry) is written
 * over. A bus error is thrown (and the caller retries).
 */
async function create(deps: IdempotencyBucketDeps, key: string, value: Uint8Array): Promise<CreatedOrHeld> {
  const subject = kvSubject(deps.subjects.buckets().idempotency, key);
  const publisher = AckPublisher.of(deps.nc);
  try {
    const ack = await publisher.publish(subject, value, { expectLastSubjectSequence: 0 });
    return { created: true, revision: ack.seq };
  } catch (err) {
    if (!isWrongLastSequence(err)) throw err;
  }
  const entry = await deps.idempotency.get(key);
  if (entry?.operation === "PUT") {
    return { created: false, record: decode(IdempotencyRecord, entry.value), revision: entry.revision };
  }
  // A delete marker: written over. Refused again (a twin got there first), the next attempt reads it.
  const ack = await publisher.publish(subject, value, { expectLastSubjectSequence: entry?.revision ?? 0 });
  return { created: true, revision: ack.seq };
}
