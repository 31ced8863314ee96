import { DeliverPolicy } from "@nats-io/jetstream";
import { AuditEvent } from "../../shared/contracts/audit.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { readHeld } from "../../shared/bus/read-range.js";
import { auditTally, readAudit } from "../../shared/bus/audit.js";
import { entryOfMessage, scanLog } from "../../shared/bus/run-log.js";
import { withBusRetry } from "../../shared/bus/retry.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { closeOnAbort } from "../../shared/bus/close-on-abort.js";

/** What reading the run log takes, and the statuses a run is known by (an actor's bus has them). */
export type AuditReads = Pick<ActorBus, "subjects" | "jsm" | "js" | "clock" | "random"> & {
  buckets: Pick<ActorBus["buckets"], "runs">;
};

/** How many of the whole stream's events `audit tail` prints unless told (a run's trail is printed whole). */
export const STREAM_TAIL_DEFAULT = 100;

export interface TailOptions {
  /** Only this run's events. */
  runId?: string;
  /** Only the last this many of the events held now (all of them when undefined; none when 0). */
  last?: number;
  /** Then wait for new events (an ordered consumer) until aborted. */
  follow: boolean;
  signal?: AbortSignal;
  /**
   * Told how many earlier events `last` left out, before the first is yielded (of the whole log:
   * how many earlier messages, each one transition's events).
   */
  onLeftOut?: (count: number) => void;
  /** Following a run the cluster does not know (yet): told before waiting for its first event. */
  onUnknownRun?: () => void;
}

/**
 * Audit events in stream order: the last `last` of those held now (of one run, or of the whole
 * log, refused submits included), then, with `follow`, every new one. Following starts just after
 * what the stream held when the read began, so nothing is shown twice or missed in between, and a
 * log of millions of messages is not replayed before the first new one. A run the cluster does not
 * know is NOT_FOUND, unless followed (it may be submitted yet): an empty trail would read as a run
 * that did nothing.
 */
export async function* tailAudit(bus: AuditReads, options: TailOptions): AsyncGenerator<AuditEvent> {
  const stream = bus.subjects.streams().log;
  const { state } = await withBusRetry(`reading the state of ${stream}`, bus, () =>
    bus.jsm.streams.info(stream),
  );
  // `-n 0`: only what comes next, so nothing held is read (a run's whole trail included).
  const none = options.last === 0;
  const { events: held, before } = options.runId
    ? { events: none ? [] : await runEvents(bus, options.runId), before: 0 }
    : await lastEvents(bus, state, options.last);
  if (options.runId && held.length === 0 && !(await known(bus, options.runId))) {
    if (!options.follow)
      throw new AgentError(
        "NOT_FOUND",
        `no run '${options.runId}' under AGENTS_PREFIX '${bus.subjects.prefix}': no log, status or refused submit names it`,
      );
    options.onUnknownRun?.();
  }
  const keep = Math.min(held.length, options.last ?? held.length);
  if (!none && (keep < held.length || before > 0)) options.onLeftOut?.(held.length - keep + before);
  yield* held.slice(held.length - keep);
  const filters = options.runId
    ? [bus.subjects.logAll(options.runId), bus.subjects.rejected(options.runId)]
    : [bus.subjects.logAll(), bus.subjects.rejectedAll()];
  if (options.follow) yield* follow(bus, stream, filters, state.last_seq + 1, options.signal);
}

/** A run's trail: its log's events, its refused submits among them in their place. */
async function runEvents(bus: AuditReads, runId: string): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  for await (const event of readAudit(bus, { runId })) events.push(event);
  return events;
}

/**
 * Whether the cluster knows the run: it has a log (one of records only, or whose status
 * retention removed, too), a status (admitted, its first message not read yet) or a refused submit.
 */
async function known(bus: AuditReads, runId: string): Promise<boolean> {
  if ((await auditTally(bus, runId)).messages > 0) return true;
  if (await new RunStatusStore(bus.buckets.runs, bus).get(runId)) return true;
  const stream = bus.subjects.streams().log;
  const { state } = await withBusRetry(`looking for ${runId}'s refused submits`, bus, () =>
    bus.jsm.streams.info(stream, { subjects_filter: bus.subjects.rejected(runId) }),
  );
  return Object.keys(state.subjects ?? {}).length > 0;
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
  // An empty stream reports first_seq 0 (or, once its messages expired, one past the last).
  const fromSeq = last === undefined ? 1 : Math.max(state.first_seq, state.last_seq - last + 1, 1);
  const held: { seq: number; events: AuditEvent[] }[] = [];
  for await (const { seq, entry } of scanLog(bus, undefined, fromSeq))
    held.push({ seq, events: entry.events });
  const stream = bus.subjects.streams().log;
  for await (const msg of readHeld(bus.jsm, stream, bus.subjects.rejectedAll(), fromSeq)) {
    if (msg.seq <= state.last_seq) held.push({ seq: msg.seq, events: [decode(AuditEvent, msg.data)] });
  }
  return {
    events: held.sort((a, b) => a.seq - b.seq).flatMap((h) => h.events),
    before: state.messages === 0 ? 0 : Math.max(0, fromSeq - state.first_seq),
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
  closeOnAbort(messages, signal);
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
