import { AckPolicy, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { Counter } from "prom-client";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { ensureDurable } from "../../shared/bus/durable.js";
import { whenJetStreamAnswers } from "../../shared/bus/jetstream-silent.js";
import { fanOutKey } from "../../shared/bus/fanout.js";
import { removeMessage } from "../../shared/bus/remove-message.js";
import { withBusRetry } from "../../shared/bus/retry.js";
import { treeCapKey } from "../../shared/bus/tree-iterations.js";
import { isFinished, RunStatus } from "../../shared/contracts/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { eventsOfMessage } from "../../shared/bus/run-log.js";
import { onEventFailure } from "./event-failure.js";
import { ToolRecords } from "./tool-records.js";
import { bucketStream } from "../../shared/bus/subjects.js";
import { deniedByPermissions } from "../../shared/bus/link.js";
import { closeOnAbort } from "../../shared/bus/close-on-abort.js";

/** The sweep's durable consumer, shared by the supervisor replicas. */
export const RETENTION_CONSUMER = "supervisor-status-retention";
/** The events after which a run never runs again (a halted run may resume: its status stays). */
const FINAL_KINDS = new Set<string>(["run.committed", "run.failed"]);
/**
 * The longest a not-yet-due event is put back for: a shorter retention set later takes effect
 * within this, rather than after the delay the old setting asked for.
 */
export const MAX_PUT_BACK_MS = 3_600_000;
/** Reads and removals of a tree's key before giving up on one that keeps being written. */
const MAX_RETIRE_ATTEMPTS = 5;

/**
 * Refused when the run log keeps messages (`max_age`, in nanoseconds as JetStream says it; 0 for
 * ever) no longer than a finished run's status: once both are gone, nothing remembers that the
 * run's id ran, and a submit naming it would start it afresh. Pure.
 */
export function logOutlivesStatuses(maxAgeNanos: number, statusRetainMs: number): AgentError | undefined {
  const logMs = maxAgeNanos / 1_000_000;
  if (statusRetainMs === 0 || maxAgeNanos === 0 || logMs > statusRetainMs) return undefined;
  return new AgentError(
    "INVALID_INPUT",
    `invalid configuration: the run log keeps messages ${logMs} ms (its max_age, see SUPERVISOR_LOG_MAX_AGE_MS), no longer than SUPERVISOR_STATUS_RETAIN_MS (${statusRetainMs}): a finished run's id is refused a new run only while its log remembers it`,
  );
}

/** How long to wait before a run that finished at `finishedAt` may lose its status; 0 when due. Pure. */
export function putBackFor(finishedAt: number, now: number, retainMs: number): number {
  return Math.min(MAX_PUT_BACK_MS, Math.max(0, finishedAt + retainMs - now));
}

export interface RetentionOptions {
  /** How long after its `run.committed` or `run.failed` a finished run loses what the sweep removes. */
  retainMs: number;
}

/** What the sweep counts: the statuses, idempotency records and tree caps it removed. */
export interface RetentionCounters {
  toolRecords: Counter;
  statuses?: Counter;
  /** Root runs whose tree's cap (and iteration counter) went with their status. */
  treeBudgets?: Counter;
}

/**
 * Removes what a finished run no longer needs from the buckets, `retainMs` after it finished
 * (SUPERVISOR_STATUS_RETAIN_MS): its tool calls' idempotency records, a root run's tree cap and
 * iteration counter, its fan-out record and its status. Its log stays until the stream's max_age.
 * The run lifecycle messages are read in stream order through one durable consumer, shared by the
 * supervisor replicas, one at a time: one not yet due is put back until it is (NAK with a delay),
 * which holds the later ones back too, since they finished later. The status is read first:
 * nothing is removed for a run that is not committed or failed, and it goes last, so a sweep
 * stopped midway finds the run as finished as before when the message comes again.
 */
export async function sweepFinishedRuns(
  bus: ActorBus,
  options: RetentionOptions,
  counters: RetentionCounters,
  signal: AbortSignal,
): Promise<void> {
  const stream = bus.subjects.streams().log;
  const messages = await whenJetStreamAnswers("the retention consumer", bus, async () => {
    await ensureDurable(bus.jsm, stream, {
      durable_name: RETENTION_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      // Runs that finished before retention was turned on are swept too, oldest first.
      deliver_policy: DeliverPolicy.All,
      filter_subject: bus.subjects.logLifecycle(),
      max_ack_pending: 1,
    });
    const consumer = await bus.js.consumers.get(stream, RETENTION_CONSUMER);
    return consumer.consume({ max_messages: 1 });
  });
  closeOnAbort(messages, signal);
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

  /** One lifecycle message: the run's remains removed when due, or the message put back until it is. Never rejects. */
  async onEvent(msg: JsMsg): Promise<void> {
    const { bus, options } = this;
    try {
      const event = (await eventsOfMessage(bus, msg))?.find((e) => FINAL_KINDS.has(e.kind));
      if (!event) {
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
        await this.removeToolRecords(event.runId);
        // The tree goes before the status, so a sweep stopped between the two does it again.
        if ((status.rootRunId ?? status.runId) === status.runId) await this.retireTree(status.runId);
        await this.removeFanOut(event.runId);
        await this.removeStatus(event.runId, entry.revision);
      }
      msg.ack();
    } catch (err) {
      onEventFailure(bus, msg, err, "could not remove a finished run's status");
    }
  }

  private async removeToolRecords(runId: string): Promise<void> {
    const removed = await this.records.removeFor(runId);
    this.counters.toolRecords.inc(removed);
    if (removed > 0)
      this.bus.logger.info({ runId, toolRecords: removed }, "finished run's tool records removed");
  }

  /**
   * A root run's tree cap, removed by its sequence (no marker left) once the root's status goes,
   * then the tree's iteration counter: both would otherwise stay for ever, one per root run. The
   * cap goes first: a run of the tree reserving afterwards finds none and is refused (GLOBAL_CAP),
   * as is a child submitted naming a run of it, so removing them never lets a tree count afresh.
   */
  private async retireTree(rootRunId: string): Promise<void> {
    const { bus } = this;
    const key = treeCapKey(rootRunId);
    const stream = bucketStream(bus.subjects.buckets().pool);
    for (let attempt = 0; attempt < MAX_RETIRE_ATTEMPTS; attempt++) {
      const entry = await withBusRetry(`reading ${key}`, bus, () => bus.buckets.pool.get(key));
      if (entry?.operation !== "PUT") {
        await this.purgeCounter(rootRunId);
        if (attempt > 0) {
          this.counters.treeBudgets?.inc();
          bus.logger.info({ rootRunId }, "finished run tree's budget removed");
        }
        return;
      }
      const removal = await removeMessage(bus, stream, entry.revision, `${rootRunId}'s tree cap`);
      if (removal === "denied") {
        this.deniedOnce(stream, "the pool bucket", "run trees' caps and counters are kept");
        return;
      }
    }
    bus.logger.warn({ rootRunId, key }, "a finished run tree's cap kept changing while it was removed: kept");
  }

  /** The tree's counters, purged by their subjects (a sweep that comes again purges nothing). */
  private async purgeCounter(rootRunId: string): Promise<void> {
    const { bus } = this;
    const stream = bus.subjects.streams().counters;
    const filter = bus.subjects.treeCounters(rootRunId);
    const purged = await withBusRetry(`purging ${filter}`, bus, () =>
      bus.jsm.streams.purge(stream, { filter }).then(
        () => true,
        (err: unknown) => {
          if (deniedByPermissions(err)) return false;
          throw err;
        },
      ),
    );
    if (!purged) this.deniedOnce(stream, "the counters stream", "run trees' counters are kept", "PURGE");
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

  /** A removal this NATS user may not make (an older permissions.conf): said once for each stream. */
  private deniedOnce(stream: string, what: string, consequence: string, api = "MSG.DELETE"): void {
    if (this.deniedSaid.has(stream)) return;
    this.deniedSaid.add(stream);
    this.bus.logger.warn(
      { stream },
      `this NATS user may not remove messages from ${what}: ${consequence} (allow the supervisor $JS.API.STREAM.${api} on it, see permissions.conf)`,
    );
  }
}
