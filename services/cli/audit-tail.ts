import { DeliverPolicy } from "@nats-io/jetstream";
import { AuditEvent } from "../../shared/contracts/audit.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { readHeld } from "../../shared/bus/read-range.js";
import { entryOfMessage, scanLog } from "../../shared/bus/run-log.js";
import { withBusRetry } from "../../shared/bus/retry.js";

/** What reading the run log takes (an actor's bus has it). */
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
  /**
   * Told how many earlier events `last` left out, before the first is yielded (of the whole log:
   * how many earlier messages, each one transition's events).
   */
  onLeftOut?: (count: number) => void;
}

/**
 * Audit events in stream order: the last `last` of those held now (of one run, or of the whole
 * log, refused submits included), then, with `follow`, every new one. Following starts just after
 * what the stream held when the read began, so nothing is shown twice or missed in between, and a
 * log of millions of messages is not replayed before the first new one.
 */
export async function* tailAudit(bus: AuditReads, options: TailOptions): AsyncGenerator<AuditEvent> {
  const stream = bus.subjects.streams().log;
  const { state } = await withBusRetry(`reading the state of ${stream}`, bus, () =>
    bus.jsm.streams.info(stream),
  );
  const { events: held, before } = options.runId
    ? { events: await runEvents(bus, options.runId), before: 0 }
    : await lastEvents(bus, state, options.last);
  const keep = Math.min(held.length, options.last ?? held.length);
  if (keep < held.length || before > 0) options.onLeftOut?.(held.length - keep + before);
  yield* held.slice(held.length - keep);
  const filters = options.runId
    ? [bus.subjects.logAll(options.runId)]
    : [bus.subjects.logAll(), bus.subjects.rejectedAll()];
  if (options.follow) yield* follow(bus, stream, filters, state.last_seq + 1, options.signal);
}

async function runEvents(bus: AuditReads, runId: string): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  for await (const { entry } of scanLog(bus, runId)) events.push(...entry.events);
  return events;
}

/**
 * The events of the log's last `last` messages, refused submits among them, in stream order, and
 * how many messages came before them: a message holds one event at least (but for a rare one of
 * records only), so they hold the last `last` events.
 */
async function lastEvents(
  bus: AuditReads,
  state: { first_seq: number; last_seq: number; messages: number },
  last: number | undefined,
): Promise<{ events: AuditEvent[]; before: number }> {
  const fromSeq = last === undefined ? 1 : Math.max(state.first_seq, state.last_seq - last + 1);
  const held: { seq: number; events: AuditEvent[] }[] = [];
  for await (const { seq, entry } of scanLog(bus, undefined, fromSeq))
    held.push({ seq, events: entry.events });
  const stream = bus.subjects.streams().log;
  for await (const msg of readHeld(bus.jsm, stream, bus.subjects.rejectedAll(), fromSeq)) {
    if (msg.seq <= state.last_seq) held.push({ seq: msg.seq, events: [decode(AuditEvent, msg.data)] });
  }
  return {
    events: held.sort((a, b) => a.seq - b.seq).flatMap((h) => h.events),
    before: fromSeq - state.first_seq,
  };
}

async function* follow(
  bus: AuditReads,
  stream: string,
  filters: string[],
  fromSeq: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<AuditEvent> {
  const consumer = await bus.js.consumers.get(stream, {
    filter_subjects: filters,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: fromSeq,
  });
  const messages = await consumer.consume();
  signal?.addEventListener("abort", () => void messages.close(), { once: true });
  const rejected = bus.subjects.rejectedAll().slice(0, -1);
  try {
    for await (const msg of messages) {
      if (msg.subject.startsWith(rejected)) {
        yield decode(AuditEvent, msg.data);
        continue;
      }
      // A split message is read whole at its last part (runs' parts may interleave).
      const entry = await entryOfMessage(bus, msg);
      if (entry) yield* entry.events;
    }
  } finally {
    await messages.close();
  }
}
