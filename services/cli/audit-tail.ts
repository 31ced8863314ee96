import { DeliverPolicy } from "@nats-io/jetstream";
import { AuditEvent } from "../../shared/contracts/audit.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { readRange } from "../../shared/bus/read-range.js";
import { withBusRetry } from "../../shared/bus/retry.js";

/** What reading the audit stream takes (an actor's bus has it). */
export type AuditReads = Pick<ActorBus, "subjects" | "jsm" | "js" | "clock" | "random">;

/** How many of the whole stream's events `audit tail` prints unless told (a run's trail is printed whole). */
export const STREAM_TAIL_DEFAULT = 100;

export interface TailOptions {
  /** Only this run's events. */
  runId?: string;
  /** Only the last this many of the events held now (all of them when undefined). */
  last?: number;
  /** Then wait for new events (an ordered consumer) until aborted. */
  follow: boolean;
  signal?: AbortSignal;
  /** Told how many earlier events `last` left out, before the first is yielded. */
  onLeftOut?: (count: number) => void;
}

/**
 * Audit events in stream order: the last `last` of those held now (of one run, or of the stream),
 * then, with `follow`, every new one. Following starts just after what the stream held when the
 * read began, so nothing is shown twice or missed in between, and a stream of millions of events is
 * not replayed before the first new one.
 */
export async function* tailAudit(bus: AuditReads, options: TailOptions): AsyncGenerator<AuditEvent> {
  const stream = bus.subjects.streams().audit;
  const filter = bus.subjects.auditAll(options.runId);
  const { state } = await withBusRetry(`reading the state of ${stream}`, bus, () =>
    bus.jsm.streams.info(stream, options.runId ? { subjects_filter: filter } : undefined),
  );
  const held = options.runId
    ? Object.values(state.subjects ?? {}).reduce((sum, n) => sum + n, 0)
    : state.messages;
  const keep = Math.min(held, options.last ?? held);
  if (keep < held) options.onLeftOut?.(held - keep);
  if (keep > 0)
    yield* options.runId
      ? lastOfRun(bus, stream, filter, held, keep)
      : lastOfStream(bus, stream, state, keep);
  if (options.follow) yield* follow(bus, stream, filter, state.last_seq + 1, options.signal);
}

/** The stream's last `keep` events: it holds audit events only, and none is ever removed but the oldest. */
async function* lastOfStream(
  bus: AuditReads,
  stream: string,
  state: { first_seq: number; last_seq: number },
  keep: number,
): AsyncGenerator<AuditEvent> {
  const fromSeq = Math.max(state.first_seq, state.last_seq - keep + 1);
  for await (const msg of readRange(bus, {
    stream,
    filter: bus.subjects.auditAll(),
    fromSeq,
    count: keep,
  }))
    yield decode(AuditEvent, msg.data);
}

/** A run's last `keep` of the `held` events it has: its subjects interleave with other runs', so it is read through. */
async function* lastOfRun(
  bus: AuditReads,
  stream: string,
  filter: string,
  held: number,
  keep: number,
): AsyncGenerator<AuditEvent> {
  const skip = held - keep;
  let index = 0;
  for await (const msg of readRange(bus, { stream, filter, count: held })) {
    if (index++ >= skip) yield decode(AuditEvent, msg.data);
  }
}

async function* follow(
  bus: AuditReads,
  stream: string,
  filter: string,
  fromSeq: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<AuditEvent> {
  const consumer = await bus.js.consumers.get(stream, {
    filter_subjects: filter,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: fromSeq,
  });
  const messages = await consumer.consume();
  signal?.addEventListener("abort", () => void messages.close(), { once: true });
  try {
    for await (const msg of messages) yield decode(AuditEvent, msg.data);
  } finally {
    await messages.close();
  }
}
