import { AckPolicy, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { Counter } from "prom-client";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { ensureDurable } from "../../shared/bus/durable.js";
import { withBusRetry } from "../../shared/bus/retry.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { isFinished } from "../../shared/contracts/run-status.js";
import { AuditEvent } from "../../shared/contracts/audit.js";
import { onEventFailure } from "./event-failure.js";
import { ToolRecords } from "./tool-records.js";

export const RETENTION_CONSUMER = "supervisor-wal-retention";
/** The events after which a run never runs again (a halted run may resume: its WAL stays). */
const FINAL_KINDS = new Set<string>(["run.committed", "run.failed"]);
/**
 * The longest a not-yet-due event is put back for: a shorter SUPERVISOR_WAL_RETAIN_MS set later
 * takes effect within this, rather than after the delay the old setting asked for.
 */
export const MAX_PUT_BACK_MS = 3_600_000;

/** How long to wait before a run that finished at `finishedAt` may lose its WAL; 0 when due. Pure. */
export function putBackFor(finishedAt: number, now: number, retainMs: number): number {
  return Math.min(MAX_PUT_BACK_MS, Math.max(0, finishedAt + retainMs - now));
}

export interface RetentionOptions {
  /** A finished run's WAL is removed this long after its `run.committed` or `run.failed`. */
  retainMs: number;
}

/** What the sweep counts: runs whose WAL it removed, and the idempotency records it removed with them. */
export interface RetentionCounters {
  wals: Counter;
  toolRecords: Counter;
}

/**
 * Removes the WAL of runs that finished `retainMs` ago. A committed or failed run never runs
 * again, and its audit trail and status keep what it did; its WAL, most of what a run leaves in
 * the file store, would otherwise stay for ever. The run lifecycle events are read in stream order
 * through one durable consumer shared by the supervisor replicas, one at a time: an event not yet
 * due is put back until it is (NAK with a delay), which holds the later ones back too, since
 * they finished later. The status is read first: a WAL is removed only for a run that is still
 * committed or failed. What was removed is gone for `agentctl replay` too. The idempotency
 * records of the run's tool calls go first (see ToolRecords): its WAL is what names them.
 */
export async function sweepFinishedWals(
  bus: ActorBus,
  options: RetentionOptions,
  counters: RetentionCounters,
  signal: AbortSignal,
): Promise<void> {
  const stream = bus.subjects.streams().audit;
  await ensureDurable(bus.jsm, stream, {
    durable_name: RETENTION_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    // Runs that finished before retention was turned on are swept too, oldest first.
    deliver_policy: DeliverPolicy.All,
    filter_subject: bus.subjects.auditRunLifecycle(),
    max_ack_pending: 1,
  });
  const consumer = await bus.js.consumers.get(stream, RETENTION_CONSUMER);
  const messages = await consumer.consume({ max_messages: 1 });
  signal.addEventListener("abort", () => void messages.close(), { once: true });
  const records = new ToolRecords(bus);
  for await (const msg of messages) await onFinished(bus, options, counters, records, msg);
}

/** One lifecycle event: the WAL removed when due, or the event put back until it is. Never rejects. */
async function onFinished(
  bus: ActorBus,
  options: RetentionOptions,
  counters: RetentionCounters,
  records: ToolRecords,
  msg: JsMsg,
): Promise<void> {
  try {
    const event = decode(AuditEvent, msg.data);
    if (!FINAL_KINDS.has(event.kind)) {
      msg.ack();
      return;
    }
    const finishedAt = Math.floor(msg.info.timestampNanos / 1_000_000);
    const wait = putBackFor(finishedAt, bus.clock.now(), options.retainMs);
    if (wait > 0) {
      msg.nak(wait);
      return;
    }
    const status = await new RunStatusStore(bus.buckets.runs).get(event.runId);
    if (isFinished(status)) {
      const toolRecords = await records.removeFor(event.runId);
      counters.toolRecords.inc(toolRecords);
      const subject = bus.subjects.wal(event.runId);
      const reply = await withBusRetry(`removing ${subject}`, bus, () =>
        bus.jsm.streams.purge(bus.subjects.streams().wal, { filter: subject }),
      );
      if (reply.purged > 0) {
        counters.wals.inc();
        bus.logger.info(
          { runId: event.runId, messages: reply.purged, toolRecords },
          "finished run's WAL removed",
        );
      }
    }
    msg.ack();
  } catch (err) {
    onEventFailure(bus, msg, err, "could not remove a finished run's WAL");
  }
}
