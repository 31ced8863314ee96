import type { AuditEvent, AuditKind } from "../../shared/contracts/audit.js";
import { isFinished, type RunStatus } from "../../shared/contracts/run-status.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { LogWriter } from "../../shared/bus/run-log.js";
import type { LoopState, Transition } from "../../shared/loop/state.js";
import { statusOf } from "../../shared/loop/status.js";
import type { Logger } from "../../shared/runtime/logger.js";
import type { ActorMetrics } from "../../shared/runtime/metrics.js";

export interface JournalDeps {
  bus: ActorBus;
  writer: LogWriter;
  metrics: ActorMetrics;
  /** The worker's logger: a line about an event is written by a child carrying `logContext`. */
  logger: Logger;
  /** What the lease's lines carry as it is now (the run, its phase and iteration). */
  logContext: () => LogContext;
  /** Called once an append is acknowledged: what waited for its records to be durable goes on. */
  durable?: () => Promise<void>;
}

/** The bindings of a lease's log lines: the run, and its phase and iteration when it has them. */
export type LogContext = Record<string, unknown>;

/** What a run handed back for a model outage waits out, as its status tells it. */
export type OutageWait = Pick<RunStatus, "waiting"> | Pick<RunStatus, "retrying">;

/**
 * Transitions whose status writes may trail the log at once: bounds what a slow status bucket can
 * hold up in memory.
 */
const MAX_TRAILING = 32;

/**
 * Where a lease writes what its run does: the run's log (the durable truth, and the audit trail)
 * and the status view.
 *
 * - One append per transition: its records and its audit events travel as one message, so a
 *   subscriber sees an event exactly when what it reports is durable, and a crash leaves nothing
 *   to publish again.
 * - A transition whose only effect is a model call may hold its message back, to ride with the
 *   next transition's. A model call changes nothing outside, so a crash before that append costs a
 *   repeated model call, never a repeated side effect: the run resumes from the records before,
 *   and a tool outcome that was not written yet is settled by its idempotency key.
 * - The status trails the log: it is written while the next model or tool call runs, one
 *   transition after another, and only once the transition is durable. It is written when the
 *   run's status changes, or the run starts to fail (see takesNoChildResults); each message of the
 *   log carries the run's progress (phase, iteration, usage) in between.
 */
export class RunJournal {
  private readonly status: RunStatusStore;
  private held: WalRecord[] = [];
  private heldEvents: AuditEvent[] = [];
  private heldStates: LoopState[] = [];
  private trailing: Promise<void> | undefined;
  private trailingCount = 0;
  /** What the status view last showed, to write it only when that changes. */
  private lastStatus: Pick<LoopState, "status" | "phase"> | undefined;
  /** The status revision this lease last wrote or read (see putStatus). */
  private statusRevision: number | undefined;

  constructor(private readonly deps: JournalDeps) {
    this.status = new RunStatusStore(deps.bus.buckets.runs, deps.bus);
  }

  /** Records one transition; with `hold`, its message may wait for the next transition's append. */
  async record(t: Transition, hold: boolean): Promise<void> {
    let checkpoint = false;
    for (const effect of t.effects) {
      if (effect.type === "wal") {
        this.held.push(effect.record);
        if (effect.record.type === "CHECKPOINT") checkpoint = true;
      } else if (effect.type === "audit") this.heldEvents.push(effect.event);
    }
    this.heldStates.push(t.state);
    if (!hold || checkpoint) await this.flush();
  }

  /** Writes the held records and events in one append, then queues the status writes they owe. */
  private async flush(): Promise<void> {
    if (this.heldStates.length === 0) return;
    const records = this.held;
    const events = this.heldEvents;
    const states = this.heldStates;
    if (this.trailingCount >= MAX_TRAILING) await this.settleTrailing();
    const last = states.at(-1);
    if (last && (records.length > 0 || events.length > 0)) {
      const { phase, guard, usage, updatedAt: at } = last;
      await this.deps.writer.append(records, events, { phase, iteration: guard.iteration, usage, at });
      await this.deps.durable?.();
    }
    this.held = [];
    this.heldEvents = [];
    this.heldStates = [];
    const context = this.deps.logContext();
    for (const event of events) this.observe(event, context);
    for (const state of states) if (this.statusDue(state)) this.trail(state);
  }

  /** Everything recorded is durable and the status written: the lease's last act before its job is acked. */
  async settle(): Promise<void> {
    await this.flush();
    await this.settleTrailing();
  }

  /** After a failure: waits for what is in flight, whatever its outcome; held records are dropped. */
  async abandon(): Promise<void> {
    await this.trailing?.catch(() => undefined);
  }

  /**
   * Writes what the replay produced past the end of the log (see Replayed.unwritten): a log that
   * ends in the middle of a transition is completed before the run goes on.
   */
  async catchUp(unwritten: WalRecord[]): Promise<void> {
    if (unwritten.length > 0) await this.deps.writer.append(unwritten);
  }

  /**
   * Writes the run's status now; `wait`: what it waits out (its provider's breaker, or retries).
   * Each write is a compare-and-set on the revision this lease last wrote or read, and never takes
   * a finished run back: a lease that lost its run while its worker was stopped may still have a
   * write under way, retried when the worker runs again, after the run's new worker finished it.
   */
  async putStatus(state: LoopState, wait?: OutageWait): Promise<void> {
    const record = this.statusRecord(state, wait);
    for (let tries = 0; tries < 3; tries += 1) {
      if (this.statusRevision === undefined) {
        const stored = await this.status.read(state.runId);
        if (!stored) return this.status.put(record);
        if (isFinished(stored.status) && !isFinished(state)) return;
        this.statusRevision = stored.revision;
      }
      const written = await this.status.update(record, this.statusRevision);
      // Refused: written meanwhile (another lease, an operator, or this write's first try, its ack lost).
      this.statusRevision = written === false ? undefined : written;
      if (written !== false) return;
    }
  }

  /** Whether the run has a status at all (every admitted run has one until retention removes it). */
  async hasStatus(runId: string): Promise<boolean> {
    return (await this.status.read(runId)) !== undefined;
  }

  /**
   * Writes the status of a run as this lease read it, where the lease goes no further (an event
   * found stale, a run parked): unless the stored one says the run finished, and only over the
   * status it read: the log the lease read may be older than another lease's last write.
   */
  async refreshStatus(state: LoopState): Promise<void> {
    const stored = await this.status.read(state.runId);
    if (isFinished(stored?.status) && !isFinished(state)) return;
    const record = this.statusRecord(state);
    // Refused: another lease wrote it since this one read it, and knows more.
    if (stored) await this.status.update(record, stored.revision);
    else await this.status.put(record);
  }

  private statusRecord(state: LoopState, wait?: OutageWait): RunStatus {
    return { ...statusOf(state, this.deps.bus.clock.now()), ...wait };
  }

  /** Queues a transition's status write behind the previous transition's. */
  private trail(state: LoopState): void {
    const previous = this.trailing ?? Promise.resolve();
    const next = previous.then(() => this.putStatus(state));
    // Rejections are awaited later (settleTrailing); until then they must not count as unhandled.
    next.catch(() => undefined);
    this.trailing = next;
    this.trailingCount += 1;
  }

  /**
   * Whether the status view must be written: the lease's first transition, a change of the run's
   * status, and the run entering FAIL (it takes no child's result from then on).
   */
  private statusDue(state: LoopState): boolean {
    const last = this.lastStatus;
    const { status, phase } = state;
    const due = !last || last.status !== status || (phase === "FAIL" && last.phase !== "FAIL");
    if (due) this.lastStatus = { status, phase };
    return due;
  }

  private async settleTrailing(): Promise<void> {
    const trailing = this.trailing;
    this.trailing = undefined;
    this.trailingCount = 0;
    await trailing;
  }

  /** An event now durable: counted, and logged at its level (every one is in the run's log). */
  private observe(event: AuditEvent, context: LogContext): void {
    this.deps.metrics.observeAudit(event);
    // The child logger is made only for a line that is written: one per transition (its bindings
    // serialised and redacted) took about 1 % of a worker's CPU at C = 100, for lines mostly below the level.
    const level = event.status === "failed" ? "warn" : STEP_KINDS.has(event.kind) ? "debug" : "info";
    const { logger } = this.deps;
    if (!logger.isLevelEnabled(level)) return;
    const line = { kind: event.kind, status: event.status, seq: event.seq };
    logger.child(context)[level](line, event.reason ?? event.kind);
  }
}

/** Audit kinds every step emits: logged at debug (the run's log has them all). */
export const STEP_KINDS: ReadonlySet<AuditKind> = new Set<AuditKind>([
  "model.called",
  "model.responded",
  "tool.intent",
  "tool.completed",
  "phase.entered",
  "memory.recalled",
]);
