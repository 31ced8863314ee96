import { AckPolicy, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { Counter } from "prom-client";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { ensureDurable } from "../../shared/bus/durable.js";
import { whenJetStreamAnswers } from "../../shared/bus/jetstream-silent.js";
import { fanOutKey } from "../../shared/bus/fanout.js";
import { removeMessage } from "../../shared/bus/remove-message.js";
import { withBusRetry } from "../../shared/bus/retry.js";
import { treeBudgetKey } from "../../shared/bus/tree-budget.js";
import { isFinished, RunStatus } from "../../shared/contracts/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { AuditEvent } from "../../shared/contracts/audit.js";
import { onEventFailure } from "./event-failure.js";
import { ToolRecords } from "./tool-records.js";
import { bucketStream } from "../../shared/bus/subjects.js";

/** Each sweep's durable consumer, shared by the supervisor replicas. */
export const RETENTION_CONSUMERS = {
  wal: "supervisor-wal-retention",
  status: "supervisor-status-retention",
} as const;
/** The events after which a run never runs again (a halted run may resume: its WAL stays). */
const FINAL_KINDS = new Set<string>(["run.committed", "run.failed"]);
/**
 * The longest a not-yet-due event is put back for: a shorter retention set later takes effect
 * within this, rather than after the delay the old setting asked for.
 */
export const MAX_PUT_BACK_MS = 3_600_000;
/** Reads and removals of a tree's key before giving up on one that keeps being written. */
const MAX_RETIRE_ATTEMPTS = 5;

/**
 * Refused when the audit stream keeps events (`max_age`, in nanoseconds as JetStream says it; 0
 * for ever) no longer than a finished run's status: once both are gone, nothing remembers that
 * the run's id ran, and a submit naming it would start it afresh. Pure.
 */
export function auditOutlivesStatuses(maxAgeNanos: number, statusRetainMs: number): AgentError | undefined {
  const auditMs = maxAgeNanos / 1_000_000;
  if (statusRetainMs === 0 || maxAgeNanos === 0 || auditMs > statusRetainMs) return undefined;
  return new AgentError(
    "INVALID_INPUT",
    `invalid configuration: the audit stream keeps events ${auditMs} ms (its max_age, see SUPERVISOR_AUDIT_MAX_AGE_MS), no longer than SUPERVISOR_STATUS_RETAIN_MS (${statusRetainMs}): a finished run's id is refused a new run only while its audit trail remembers it`,
  );
}

/** How long to wait before a run that finished at `finishedAt` may lose its WAL; 0 when due. Pure. */
export function putBackFor(finishedAt: number, now: number, retainMs: number): number {
  return Math.min(MAX_PUT_BACK_MS, Math.max(0, finishedAt + retainMs - now));
}

export interface RetentionOptions {
  /** How long after its `run.committed` or `run.failed` a finished run loses what the sweep removes. */
  retainMs: number;
  /**
   * `wal`: the run's WAL and its tool calls' idempotency records (SUPERVISOR_WAL_RETAIN_MS);
   * `status`: those if still there, then the run's status (SUPERVISOR_STATUS_RETAIN_MS).
   */
  removes: keyof typeof RETENTION_CONSUMERS;
}

/** What the sweeps count: runs whose WAL or status they removed, and the idempotency records removed with a WAL. */
export interface RetentionCounters {
  wals: Counter;
  toolRecords: Counter;
  statuses?: Counter;
  /** Root runs whose tree budget key went with their status. */
  treeBudgets?: Counter;
}

/**
 * Removes what a finished run no longer needs, `retainMs` after it finished. A committed or failed
 * run never runs again, and its audit trail keeps what it did; its WAL, most of what a run leaves
 * in the file store, and its status would otherwise stay for ever. The run lifecycle events are
 * read in stream order through one durable consumer per sweep, shared by the supervisor replicas,
 * one at a time: an event not yet due is put back until it is (NAK with a delay), which holds the
 * later ones back too, since they finished later. The status is read first: nothing is removed for
 * a run that is not committed or failed. The idempotency records of the run's tool calls go first
 * (see ToolRecords: its WAL is what names them), the WAL next, the status last: a sweep stopped
 * midway finds the run as finished as before when the event comes again.
 */
export async function sweepFinishedRuns(
  bus: ActorBus,
  options: RetentionOptions,
  counters: RetentionCounters,
  signal: AbortSignal,
): Promise<void> {
  const stream = bus.subjects.streams().audit;
  const durable = RETENTION_CONSUMERS[options.removes];
  const messages = await whenJetStreamAnswers(`the ${options.removes} retention consumer`, bus, async () => {
    await ensureDurable(bus.jsm, stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      // Runs that finished before retention was turned on are swept too, oldest first.
      deliver_policy: DeliverPolicy.All,
      filter_subject: bus.subjects.auditRunLifecycle(),
      max_ack_pending: 1,
    });
    const consumer = await bus.js.consumers.get(stream, durable);
    return consumer.consume({ max_messages: 1 });
  });
  signal.addEventListener("abort", () => void messages.close(), { once: true });
  const sweep = new FinishedRuns(bus, options, counters);
  for await (const msg of messages) await sweep.onEvent(msg);
}

class FinishedRuns {
  private readonly records: ToolRecords;
  private readonly deniedSaid = new Set<string>();

  constructor(
    private readonly bus: ActorBus,
    private readonly options: RetentionOptions,
    private readonly counters: RetentionCounters,
  ) {
    this.records = new ToolRecords(bus);
  }

  /** One lifecycle event: the run's remains removed when due, or the event put back until it is. Never rejects. */
  async onEvent(msg: JsMsg): Promise<void> {
    const { bus, options } = this;
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
      const entry = await withBusRetry(`reading ${event.runId}'s status`, bus, () =>
        bus.buckets.runs.get(event.runId),
      );
      const status = entry?.operation === "PUT" ? decode(RunStatus, entry.value) : undefined;
      if (entry && isFinished(status)) {
        await this.removeWal(event.runId);
        if (options.removes === "status") {
          // The tree's count goes before the status, so a sweep stopped between the two does it again.
          if ((status.rootRunId ?? status.runId) === status.runId) await this.retireTree(status.runId);
          await this.removeFanOut(event.runId);
          await this.removeStatus(event.runId, entry.revision);
        }
      }
      msg.ack();
    } catch (err) {
      onEventFailure(bus, msg, err, `could not remove a finished run's ${options.removes}`);
    }
  }

  private async removeWal(runId: string): Promise<void> {
    const { bus, counters } = this;
    const toolRecords = await this.records.removeFor(runId);
    counters.toolRecords.inc(toolRecords);
    const subject = bus.subjects.wal(runId);
    const reply = await withBusRetry(`removing ${subject}`, bus, () =>
      bus.jsm.streams.purge(bus.subjects.streams().wal, { filter: subject }),
    );
    if (reply.purged > 0) {
      counters.wals.inc();
      bus.logger.info({ runId, messages: reply.purged, toolRecords }, "finished run's WAL removed");
    }
  }

  /**
   * A root run's tree budget key, removed by its sequence (no marker left) once the root's status
   * goes: the key would otherwise stay for ever, one per root run. A run of the tree asking for a
   * lease afterwards is refused (see TreeBudget.lease), so removing it never lets a tree count
   * afresh. A lease written between the read and the removal leaves a newer message: read again.
   */
  private async retireTree(rootRunId: string): Promise<void> {
    const { bus } = this;
    const key = treeBudgetKey(rootRunId);
    const stream = bucketStream(bus.subjects.buckets().pool);
    for (let attempt = 0; attempt < MAX_RETIRE_ATTEMPTS; attempt++) {
      const entry = await withBusRetry(`reading ${key}`, bus, () => bus.buckets.pool.get(key));
      if (entry?.operation !== "PUT") {
        if (attempt > 0) {
          this.counters.treeBudgets?.inc();
          bus.logger.info({ rootRunId }, "finished run tree's budget removed");
        }
        return;
      }
      const removal = await removeMessage(bus, stream, entry.revision, `${rootRunId}'s tree budget`);
      if (removal === "denied") {
        this.deniedOnce(stream, "the pool bucket", "run trees' budget keys are kept");
        return;
      }
    }
    bus.logger.warn(
      { rootRunId, key },
      "a finished run tree's budget kept changing while it was removed: kept",
    );
  }

  /**
   * The record of the run's last fan-out (a run that spawned children), removed by its sequence
   * before the status: it is read only while the run waits for its children, and would otherwise
   * stay in the runs bucket for ever, one per parent run.
   */
  private async removeFanOut(runId: string): Promise<void> {
    const { bus } = this;
    const key = fanOutKey(runId);
    const entry = await withBusRetry(`reading ${key}`, bus, () => bus.buckets.runs.get(key));
    if (entry?.operation !== "PUT") return;
    const stream = bucketStream(bus.subjects.buckets().runs);
    if ((await removeMessage(bus, stream, entry.revision, `${runId}'s fan-out`)) === "denied")
      this.deniedOnce(stream, "the runs bucket", "finished runs' statuses are kept");
  }

  /**
   * The status's one message (the bucket keeps one per key), removed by its sequence: no delete
   * marker is left, so the bucket holds nothing of the run. A status rewritten since it was read
   * has a new sequence, and stays.
   */
  private async removeStatus(runId: string, revision: number): Promise<void> {
    const { bus } = this;
    const stream = bucketStream(bus.subjects.buckets().runs);
    const removal = await removeMessage(bus, stream, revision, `${runId}'s status`);
    if (removal === "removed") {
      this.counters.statuses?.inc();
      bus.logger.info({ runId }, "finished run's status removed");
    } else {
      this.deniedOnce(stream, "the runs bucket", "finished runs' statuses are kept");
    }
  }

  /** A removal this NATS user may not make (an older permissions.conf): said once for each bucket. */
  private deniedOnce(stream: string, what: string, consequence: string): void {
    if (this.deniedSaid.has(stream)) return;
    this.deniedSaid.add(stream);
    this.bus.logger.warn(
      { stream },
      `this NATS user may not remove messages from ${what}: ${consequence} (allow the supervisor $JS.API.STREAM.MSG.DELETE on it, see permissions.conf)`,
    );
  }
}
