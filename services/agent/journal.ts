import type { AuditEvent, AuditKind } from "../../shared/contracts/audit.js";
import { isFinished, type RunStatus } from "../../shared/contracts/run-status.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { auditCount, publishAudit } from "../../shared/bus/audit.js";
import { DUPLICATE_WINDOW_MS } from "../../shared/bus/provision.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { WalWriter } from "../../shared/bus/wal.js";
import type { LoopState, Transition } from "../../shared/loop/state.js";
import { statusOf } from "../../shared/loop/status.js";
import type { Logger } from "../../shared/runtime/logger.js";
import type { ActorMetrics } from "../../shared/runtime/metrics.js";

export interface JournalDeps {
  bus: ActorBus;
  writer: WalWriter;
  /** The stream sequence of the run's last checkpoint, carried by its status for a flat resume. */
  checkpointSeq: number | undefined;
  /** A status write that would change only counters waits until this long after the last one. */
  statusEveryMs: number;
  metrics: ActorMetrics;
  /** The worker's logger: a line about an event is written by a child carrying `logContext`. */
  logger: Logger;
  /** What the lease's lines carry as it is now (the run, its phase and iteration). */
  logContext: () => LogContext;
}

/** The bindings of a lease's log lines: the run, and its phase and iteration when it has them. */
export type LogContext = Record<string, unknown>;

/** What a run handed back for a model outage waits out, as its status tells it. */
export type OutageWait = Pick<RunStatus, "waiting"> | Pick<RunStatus, "retrying">;

/** What a recorded transition still owes the audit stream and the status view. */
interface Owed {
  state: LoopState;
  audits: AuditEvent[];
  checkpoint: boolean;
}

/**
 * Transitions whose events may trail the WAL at once: bounds what a crash leaves to re-publish
 * and what a slow audit stream can hold up in memory.
 */
const MAX_TRAILING = 32;

/**
 * Where a lease writes what its run does: the WAL (the durable truth), the audit stream and the
 * status view.
 *
 * - One append per transition: its records travel as one message.
 * - A transition whose only effect is a model call may hold its records back, to ride with the
 *   next transition's. A model call changes nothing outside, so a crash before that append costs a
 *   repeated model call, never a repeated side effect: the run resumes from the records before,
 *   and a tool outcome that was not written yet is settled by its idempotency key.
 * - Audit events and the status trail the WAL: they travel while the next model or tool call runs
 *   and the next records are written, in order, one transition after another, and only once the
 *   transition's records are durable. A crash can cut them short; the successor replays the WAL
 *   since the last checkpoint, which yields the same events, and publishes those the stream lacks
 *   (`catchUp`). Replay from a checkpoint cannot yield what came before it, so a checkpoint is a
 *   barrier: everything before it, and its own events, are acknowledged before any record follows
 *   it. Until then the log ends with the checkpoint, and a successor replays from the one before.
 */
export class RunJournal {
  private readonly status: RunStatusStore;
  /** The WAL sequence of the run's last checkpoint, which the status carries. */
  private checkpointSeq: number | undefined;
  private held: WalRecord[] = [];
  private owed: Owed[] = [];
  private trailing: Promise<void> | undefined;
  private trailingCount = 0;
  private afterCheckpoint = false;
  /** What the status view last showed and when, to skip writes that change only counters. */
  private lastStatus: { status: string; phase: string; at: number } | undefined;
  /** The status revision this lease last wrote or read (see putStatus). */
  private statusRevision: number | undefined;
  /** The latest state whose status write was skipped: written when the lease settles. */
  private statusOwed: LoopState | undefined;

  constructor(private readonly deps: JournalDeps) {
    this.status = new RunStatusStore(deps.bus.buckets.runs, deps.bus);
    this.checkpointSeq = deps.checkpointSeq;
  }

  /** Records one transition; with `hold`, its records may wait for the next transition's append. */
  async record(t: Transition, hold: boolean): Promise<void> {
    const records = t.effects.flatMap((e) => (e.type === "wal" ? [e.record] : []));
    const checkpoint = records.some((r) => r.type === "CHECKPOINT");
    this.held.push(...records);
    const audits = t.effects.flatMap((e) => (e.type === "audit" ? [e.event] : []));
    this.owed.push({ state: t.state, audits, checkpoint });
    if (!hold || checkpoint) await this.flush();
  }

  /** Writes the held records in one append, then queues what their transitions owe. */
  private async flush(): Promise<void> {
    if (this.owed.length === 0) return;
    const records = this.held;
    const owed = this.owed;
    const checkpoint = owed.some((o) => o.checkpoint);
    if (this.afterCheckpoint || this.trailingCount >= MAX_TRAILING) await this.settleTrailing();
    this.afterCheckpoint = checkpoint;
    if (records.length > 0) {
      const seq = await this.deps.writer.appendBatch(records);
      if (checkpoint) this.checkpointSeq = seq;
    }
    this.held = [];
    this.owed = [];
    for (const o of owed) this.trail(o.state, o.audits, this.statusDue(o.state, o.checkpoint));
  }

  /** Everything recorded is durable and published: the lease's last act before its job is acked. */
  async settle(): Promise<void> {
    await this.flush();
    await this.settleTrailing();
    const owed = this.statusOwed;
    if (owed) await this.putStatus(owed);
  }

  /** After a failure: waits for what is in flight, whatever its outcome; held records are dropped. */
  async abandon(): Promise<void> {
    await this.trailing?.catch(() => undefined);
  }

  /**
   * Catches up on what the previous writer did not get to: records the replay produced past the
   * end of the log (a log written one record per message, cut in the middle of a transition),
   * written now, and the audit events of the replayed transitions that the stream lacks, which
   * trail like a transition's own (ahead of the events of every transition this lease records).
   * When the log then ends with a checkpoint, those events came before it: a successor could not
   * replay them once a record follows it, so the next append waits for them (see flush).
   */
  async catchUp(
    unwritten: WalRecord[],
    audits: readonly AuditEvent[],
    endsWithCheckpoint: boolean,
  ): Promise<void> {
    if (unwritten.length > 0) await this.deps.writer.appendBatch(unwritten);
    if (audits.length === 0) return;
    this.enqueue((context) => this.republish(audits, context));
    if (endsWithCheckpoint) this.afterCheckpoint = true;
  }

  /** Publishes the owed events the stream lacks, in order. */
  private async republish(audits: readonly AuditEvent[], context: LogContext): Promise<void> {
    const { writer, bus } = this.deps;
    // A few events this recent were published, if at all, within the audit stream's duplicate
    // window: publishing them again stores only the missing ones. That spares asking the stream how
    // many it holds, which costs the server more the more runs it records. An event is never published before its timestamp.
    const oldest = Math.min(...audits.map((e) => Date.parse(e.timestamp)));
    const recent = audits.length <= REPUBLISH_AT_MOST && bus.clock.now() - oldest < DUPLICATE_WINDOW_MS / 2;
    const held = recent ? 0 : await auditCount(bus, writer.runId);
    for (const event of audits) if (event.seq > held) await this.audit(event, context);
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
    const checkpointSeq = this.checkpointSeq;
    return {
      ...statusOf(state, this.deps.bus.clock.now()),
      ...wait,
      ...(checkpointSeq !== undefined ? { checkpointSeq } : {}),
    };
  }

  /** Queues a transition's status and audit events behind the previous transition's. */
  private trail(state: LoopState, audits: AuditEvent[], status: boolean): void {
    if (!status && audits.length === 0) return;
    this.enqueue((context) => this.publish(state, audits, status, context));
  }

  /** Runs `work` once everything queued before it is done (whatever its outcome, see settleTrailing). */
  private enqueue(work: (context: LogContext) => Promise<void>): void {
    const previous = this.trailing ?? Promise.resolve();
    const context = this.deps.logContext();
    const next = previous.then(() => work(context));
    // Rejections are awaited later (settleTrailing); until then they must not count as unhandled.
    next.catch(() => undefined);
    this.trailing = next;
    this.trailingCount += 1;
  }

  /**
   * The status, then the audit events one after another, each acknowledged before the next: a
   * publish retried in a failover must not land after the event that followed it (a consumer
   * reads a run's events in stream order). Whoever reacts to an audit event (the supervisor
   * freeing a slot, completing a fan-in) finds the status already updated.
   */
  private async publish(
    state: LoopState,
    audits: AuditEvent[],
    status: boolean,
    context: LogContext,
  ): Promise<void> {
    if (status) await this.putStatus(state);
    for (const event of audits) await this.audit(event, context);
  }

  /**
   * The status view is written when the run's status or phase changes, with a checkpoint (whose
   * sequence it carries), and otherwise at most every `statusEveryMs`: a fast run's counters are
   * shown a little late rather than costing a write per step.
   */
  private statusDue(state: LoopState, checkpoint: boolean): boolean {
    const last = this.lastStatus;
    const now = this.deps.bus.clock.now();
    const { status, phase } = state;
    const changed = !last || last.status !== status || last.phase !== phase;
    if (changed || checkpoint || now - last.at >= this.deps.statusEveryMs) {
      this.lastStatus = { status, phase, at: now };
      this.statusOwed = undefined;
      return true;
    }
    this.statusOwed = state;
    return false;
  }

  private async settleTrailing(): Promise<void> {
    const trailing = this.trailing;
    this.trailing = undefined;
    this.trailingCount = 0;
    await trailing;
  }

  private async audit(event: AuditEvent, context: LogContext): Promise<void> {
    const { duplicate } = await publishAudit(this.deps.bus, event);
    // Published by the run's previous writer: counted and logged there.
    if (duplicate) return;
    this.deps.metrics.observeAudit(event);
    // Every event is in the audit stream; the log keeps the run's milestones at info. The child
    // logger is made only for a line that is written: one per transition (its bindings serialised
    // and redacted) took about 1 % of a worker's CPU at C = 100, for lines mostly below the level.
    const level = event.status === "failed" ? "warn" : STEP_KINDS.has(event.kind) ? "debug" : "info";
    const { logger } = this.deps;
    if (!logger.isLevelEnabled(level)) return;
    const line = { kind: event.kind, status: event.status, seq: event.seq };
    logger.child(context)[level](line, event.reason ?? event.kind);
  }
}

/** Past this many owed events, one count of the stream beats publishing each again (one by one). */
const REPUBLISH_AT_MOST = 64;

/** Audit kinds every step emits: logged at debug (the audit stream has them all). */
export const STEP_KINDS: ReadonlySet<AuditKind> = new Set<AuditKind>([
  "model.called",
  "model.responded",
  "tool.intent",
  "tool.completed",
  "phase.entered",
  "memory.recalled",
]);
