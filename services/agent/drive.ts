import type { RunJob } from "../../shared/contracts/cluster.js";
import type { CancelEvent, LoopEvent } from "../../shared/contracts/loop-event.js";
import { isFinished } from "../../shared/contracts/run-status.js";
import type { RunSpec } from "../../shared/contracts/run-spec.js";
import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import { readLog, writerAfter } from "../../shared/bus/run-log.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import { replay, resumableFromCheckpoint } from "../../shared/loop/replay.js";
import { UNDO_CHILDREN_TOOL } from "../../shared/loop/saga.js";
import { commitMemory } from "../../shared/loop/terminal.js";
import type { AwaitingEffect, LoopConfig, LoopState, Transition } from "../../shared/loop/state.js";
import { AgentError } from "../../shared/runtime/errors.js";
import type { Logger } from "../../shared/runtime/logger.js";
import { SPAWN_TOOL } from "./fanout.js";
import { RunJournal, type LogContext } from "./journal.js";
import { statusUnlessWaiting } from "./breaker-wait.js";
import { settleHaltedCall } from "./settle-call.js";
import { handBackOnOutage } from "./outage-hand-back.js";
import { waitForStart } from "./not-started.js";
import { sameTools, specOf } from "./spec-of.js";
import { undoChildren } from "./undo-children.js";
import { jobOfWriter, lastWriterOf } from "./writer-id.js";
import type { LeaseDeps, LeaseOutcome } from "./lease-deps.js";

/**
 * One worker's lease on one run: rebuild the run from its last checkpoint and log tail, then
 * drive the loop, writing the records that lead to anything done outside the run before doing it
 * (see RunJournal). A conflicting log append (another writer) ends the lease at once; a drain ends
 * it after the current step.
 */
export class RunLease {
  private journal!: RunJournal;
  /** Set when this lease took over a run mid-step: its first tool call is reconciled first. */
  private tookOver = false;
  private config!: LoopConfig;
  /** When the run took over last recorded a step: how long it has waited on the turn it asks again. */
  private resumedFrom = 0;
  /** Whether an earlier delivery of this job wrote the run's log last (see resume). */
  private drovePreviously = false;
  /** What the lease's log lines carry; the child logger is made when a line is written (rarely). */
  private logContext: LogContext;
  private contextLog: Logger | undefined;
  constructor(
    private readonly deps: LeaseDeps,
    private readonly job: RunJob,
  ) {
    this.logContext = { runId: job.runId };
  }

  private get log(): Logger {
    return (this.contextLog ??= this.deps.logger.child(this.logContext));
  }

  async run(): Promise<LeaseOutcome> {
    // For the whole lease, not per step: a run of many short steps outlives the ack wait too.
    const heartbeat = setInterval(this.deps.heartbeat, this.deps.heartbeatMs);
    try {
      const first = await this.open();
      if (first === "unstartable") return first;
      if (first === "held") return "fenced";
      const outcome = first ? await this.drive(first) : "done";
      // The job is acked only once everything the lease wrote is acknowledged: a finished run's
      // takeover too, which brings its status up to date.
      await this.journal?.settle();
      return outcome;
    } catch (err) {
      await this.journal?.abandon();
      if (err instanceof AgentError && err.code === "FENCED") {
        this.deps.metrics.fencingConflicts.inc();
        const driving = jobOfWriter(await lastWriterOf(this.deps.bus, this.job.runId));
        const superseded = driving !== undefined && driving !== this.deps.jobSeq;
        this.log.warn(
          { writerId: this.deps.writerId, job: this.deps.jobSeq, drivenWith: driving },
          "fenced: another worker drives this run; letting go",
        );
        return superseded ? "superseded" : "fenced";
      }
      throw err;
    } finally {
      clearInterval(heartbeat);
      this.deps.trace?.end();
      // The lease's own reservations: whoever drives the run now reserves its own.
      this.deps.leases.release();
    }
  }

  /**
   * The transition to continue from, or nothing when the run needs no worker now; `held` when an
   * earlier delivery of this job still drives the run.
   */
  private async open(): Promise<Transition | "unstartable" | "held" | undefined> {
    const { bus } = this.deps;
    const now = bus.clock.now();
    const { spec: jobSpec, event } = this.job;
    // A job's first delivery needs no status: the run has not been left waiting since it was made.
    const firstDelivery = this.deps.deliveryCount === 1;
    // A job with no outside event (a run's first, or a takeover) mostly leads to a model call once
    // the run is read: its iterations are reserved, and a first run's tools asked for, now, while
    // that happens, rather than one after another. Iterations it turns out not to need go back.
    const prefetch = (): void => {
      if (event) return;
      this.deps.leases.prefetch();
      this.deps.spend?.prefetch();
    };
    // A redelivered job reserves once the status says the run is not left waiting.
    if (firstDelivery) prefetch();
    const early = jobSpec && !event ? this.askEarly(jobSpec) : undefined;
    const status = firstDelivery
      ? undefined
      : await statusUnlessWaiting(bus.buckets.runs, this.job, this.deps.breakerOf, now);
    // Past a run left waiting (its job comes back often, and cheaply), before anything is asked.
    if (await this.heldByEarlierDelivery()) return "held";
    if (!firstDelivery) prefetch();
    // A halt handed back while its run is queued waits again without reading the run's log.
    if (status?.status === "queued") await waitForStart(bus.buckets.runs, this.job, status);
    let read = await readLog(bus, this.job.runId, "checkpoint");
    // Read from the start when the checkpoint is gone, or has no event after it (a crash right after it).
    if (read.fromSeq > 1 && !resumableFromCheckpoint(read.records.map((r) => r.record)))
      read = await readLog(bus, this.job.runId);
    this.drovePreviously = jobOfWriter(read.lastWriter) === this.deps.jobSeq;
    this.journal = new RunJournal({
      bus,
      writer: writerAfter(bus, this.job.runId, this.deps.writerId, read),
      metrics: this.deps.metrics,
      logger: this.deps.logger,
      logContext: () => this.logContext,
      durable: () => this.deps.redaction.durable(() => this.log),
    });
    const records = read.records.map((r) => r.record);
    this.deps.redaction.learn(records);
    // Tools asked early (for a run not yet started) may leave out one a started run's log needs.
    const fresh = records.length === 0;
    const spec = specOf(records) ?? this.job.spec;
    if (!spec) {
      await waitForStart(bus.buckets.runs, this.job);
      this.log.error("job dropped: it has no spec and the run has no log, so it can never start");
      return "unstartable";
    }
    this.config = {
      // A redelivered first job names the tools the log's spec names (the run's spec never changes).
      tools: await (early && sameTools(spec, jobSpec) && fresh
        ? early
        : this.deps.discover(spec.agent.tools, fresh)),
      checkpointEvery: this.deps.checkpointEvery,
      policies: this.deps.policies,
    };
    this.deps.redaction.use(this.config.tools);
    if (records.length === 0) {
      // A run whose status says it finished and whose log holds no record: its log expired with
      // the stream's max_age, and its first job delivered again after that (an ack lost with its
      // worker) must not start it afresh.
      if (isFinished(status)) {
        this.log.warn({ status: status.status }, "job dropped: its run finished and its log expired");
        return undefined;
      }
      return this.start(spec, now);
    }
    const replayed = replay(records, this.config, { fromCheckpoint: true, snapshots: "skip" });
    await this.journal.catchUp(replayed.unwritten);
    return this.resume(replayed.state, now);
  }

  /**
   * Whether the lease that wrote the run last, with an earlier delivery of this job, still drives
   * it: its worker renewed the job too late (a busy event loop) and still holds it. Taking over
   * would fence that worker and ask its step again (a model call paid twice); the job is left to it.
   */
  private async heldByEarlierDelivery(): Promise<boolean> {
    const { bus, deliveryCount, jobSeq } = this.deps;
    if (deliveryCount === 1) return false;
    // The head alone, before the run is read: a job offered again while its holder still drives
    // the run costs one read, not the log's tail.
    const lastWriter = await lastWriterOf(bus, this.job.runId);
    if (lastWriter === undefined || jobOfWriter(lastWriter) !== jobSeq) return false;
    if (!(await this.deps.heldElsewhere(lastWriter))) return false;
    this.log.info({ writer: lastWriter }, "an earlier delivery of this job still drives the run: left to it");
    return true;
  }

  /** Asks for a fresh run's tools; the answer is what is returned. */
  private askEarly(spec: RunSpec): Promise<ToolDescriptor[]> {
    const tools = this.deps.discover(spec.agent.tools, true);
    // Awaited in open(), unless the log shows another spec; a failure then must not go unhandled.
    tools.catch(() => undefined);
    return tools;
  }

  private start(spec: RunSpec, now: number): Transition {
    const { job } = this;
    return startRun(
      {
        type: "start",
        at: now,
        spec,
        runId: job.runId,
        rootRunId: job.rootRunId,
        ...(job.parentRunId ? { parentRunId: job.parentRunId } : {}),
        depth: job.depth,
        auditSeq: job.auditSeq,
        undoChildren: true,
      },
      this.config,
    );
  }

  private async resume(state: LoopState, now: number): Promise<Transition | undefined> {
    this.resumedFrom = state.updatedAt;
    const terminal = state.status === "committed" || state.status === "failed";
    const event = this.job.event ? ({ ...this.job.event, at: now } as LoopEvent) : undefined;
    if (terminal) {
      if (event) this.log.warn({ event: event.type }, "run already finished; event ignored");
      // Every run has a status from its admission on: none now means status retention removed it
      // (SUPERVISOR_STATUS_RETAIN_MS), and the run is done with for good.
      if (!(await this.journal.hasStatus(state.runId))) {
        this.log.info(
          "job dropped: its run finished and its status was removed after the cluster's retention",
        );
        return undefined;
      }
      // Its worker may have died, or lost the connection, between writing the commit and storing
      // the run's memory, the commit's one effect outside the log: stored again, it is found as
      // it is (a memory's key is its text), or written if it never was; one forgotten since the
      // commit stays forgotten.
      if (state.status === "committed") {
        const memory = commitMemory(state);
        if (!(await this.deps.performer.restore(memory.namespace, memory.text, state.updatedAt)))
          this.log.info("run already committed: its memory, forgotten since, is not stored again");
      }
      await this.journal.putStatus(state);
      return undefined;
    }
    if (event) {
      const next = await this.applyEvent(state, event);
      // Stale because this job's earlier delivery applied it, and that lease ended mid-step (its
      // worker died, or it handed the run back): the run goes on from where it left it.
      if (next || !this.drovePreviously) return next;
    }
    const parked = state.phase === "HALT" || state.pending?.kind === "approval";
    if (parked || !state.awaiting) {
      await this.journal.refreshStatus(state);
      return undefined;
    }
    this.log.info({ phase: state.phase, waitingFor: state.pending?.kind }, "taking over the run");
    this.tookOver = true;
    return transition(state, { type: "recovered", at: now, by: this.deps.workerId }, this.config);
  }

  /** The job's outside event applied to the run; undefined when it no longer fits (stale). */
  private async applyEvent(state: LoopState, event: LoopEvent): Promise<Transition | undefined> {
    const stopped = event.type === "cancel" ? await this.haltFirst(state, event) : state;
    if (!stopped) return undefined;
    // A cancel, or a resume a human settled the call for, first settles the call the run waits on.
    const queuedAt = this.job.event?.at;
    const settleDeps = { ...this.deps, config: this.config, ...(queuedAt ? { queuedAt } : {}) };
    // Redacted before the tool's service records a human's output, and after a cancel learned one.
    const settled = await settleHaltedCall(stopped, this.deps.redaction.event(stopped, event), settleDeps);
    return this.continueWith(stopped, this.deps.redaction.event(stopped, settled));
  }

  /**
   * A cancel stops a run still going first, as a halt does: written before anything is waited on,
   * the halt fences the worker driving the run (it may be in the middle of a call, which the cancel
   * then settles). Undefined when the run cannot be stopped (the halt is stale).
   */
  private async haltFirst(state: LoopState, cancel: CancelEvent): Promise<LoopState | undefined> {
    if (state.phase === "HALT") return state;
    const halt: LoopEvent = { type: "halt", at: cancel.at, reason: cancel.reason, by: cancel.by };
    const halted = await this.continueWith(state, halt);
    if (!halted) return undefined;
    await this.apply(halted);
    return halted.state;
  }

  /**
   * An outside event continues the run. One that no longer fits (a second fan-in for a call
   * already answered, a decision for a run no longer waiting) is stale: it is logged and dropped.
   */
  private async continueWith(state: LoopState, event: LoopEvent): Promise<Transition | undefined> {
    try {
      return transition(state, event, this.config);
    } catch (err) {
      if (!(err instanceof AgentError) || err.code !== "INVALID_TRANSITION") throw err;
      if (this.drovePreviously) this.log.info({ event: event.type }, "event applied by this job before");
      else this.log.warn({ event: event.type }, `stale event dropped: ${err.message}`);
      await this.journal.refreshStatus(state);
      return undefined;
    }
  }

  private async drive(first: Transition): Promise<LeaseOutcome> {
    let current = first;
    for (;;) {
      await this.deps.redaction.flush(); // Before the INTENTs of the calls the last event's redaction changed.
      const awaiting = await this.apply(current);
      const state = current.state;
      if (!awaiting || awaiting.type === "requestApproval") return "done";
      if (this.deps.stopping.aborted) return "release";
      // A run undoing its calls before it fails (FAIL) goes on: the kill switch stops new work, and
      // the undo is what an operator cancelling a run under it asks for. A halt does not fit FAIL:
      // such a run's lease failed at every delivery, backing off up to 5 min, while the switch was on.
      const killed = state.phase === "FAIL" ? undefined : this.deps.killSwitch.active;
      if (killed) {
        const halt: LoopEvent = {
          type: "halt",
          at: this.deps.bus.clock.now(),
          reason: `kill switch: ${killed.reason}`,
          by: killed.by,
        };
        current = transition(state, halt, this.config);
        continue;
      }
      const event = await this.perform(awaiting, state);
      if (event === "release") return "release";
      if (event === "park") {
        this.log.info({ waitingFor: "children" }, "parked until the children settle; no worker held");
        return "done";
      }
      if (!event) return "done";
      current = transition(state, this.deps.redaction.event(state, event), this.config);
    }
  }

  /**
   * Records one transition (see RunJournal) and performs its memory writes; returns the effect the
   * run now waits on. A transition that waits only on a model call lets its records ride with the
   * next transition's: nothing outside the run changes before they are written. So does a takeover
   * of an undo of children: its compensations' keys make them safe to send again.
   */
  private async apply(t: Transition): Promise<AwaitingEffect | undefined> {
    let awaiting: AwaitingEffect | undefined;
    const memories: Extract<Transition["effects"][number], { type: "storeMemory" }>[] = [];
    for (const effect of t.effects) {
      if (effect.type === "storeMemory") memories.push(effect);
      else if (effect.type !== "wal" && effect.type !== "audit") awaiting = effect;
    }
    this.deps.metrics.steps.inc();
    this.deps.trace?.step(t);
    // Two transitions a step: a pino child per transition (bindings serialised and redacted) cost
    // about 2 % of a worker's CPU, for a handful of lines per run.
    this.logContext = { runId: t.state.runId, phase: t.state.phase, iteration: t.state.guard.iteration };
    this.contextLog = undefined;
    // A takeover that asks an undo of children again rides too: one handed back while they end
    // (CHILDREN_GOING) then leaves no record, and the next counts the wait from the step that asked.
    const again = this.tookOver && awaiting?.type === "callTool" && awaiting.tool === UNDO_CHILDREN_TOOL;
    // Within a round of samples each step is written at once: a sample asked again is paid again.
    const asksModel = awaiting?.type === "callModel" && t.state.sampling === undefined;
    this.deps.redaction.recorded(t.state);
    await this.journal.record(t, (asksModel || again) && memories.length === 0);
    for (const memory of memories) await this.deps.performer.remember(memory.namespace, memory.text);
    return awaiting;
  }

  private async perform(
    awaiting: AwaitingEffect,
    state: LoopState,
  ): Promise<LoopEvent | "release" | "park" | undefined> {
    const timed = this.deps.metrics.phaseSeconds.startTimer({ phase: effectName(awaiting) });
    try {
      const takeover = this.tookOver;
      this.tookOver = false;
      // What the step waits on is waited on since the step that asked it, or, for a takeover that
      // asks it again, since the run's last record before it.
      const since = takeover ? this.resumedFrom : state.updatedAt;
      if (awaiting.type === "callTool" && awaiting.tool === SPAWN_TOOL) {
        return await this.deps.fanOut.spawn(awaiting, state, () =>
          this.deps.redaction.input(awaiting, state),
        );
      }
      if (awaiting.type === "callTool" && awaiting.tool === UNDO_CHILDREN_TOOL) {
        // The run's FAIL status is written before its children are read (see cancelIfOrphaned); a
        // takeover's, by the lease before it.
        if (!takeover) await this.journal.settle();
        const { runId, failing } = state;
        return await undoChildren(awaiting, { runId, reason: failing?.reason ?? "failed", since }, this.deps);
      }
      if (awaiting.type === "callTool") {
        const { reconciler, performer, stopping } = this.deps;
        return await reconciler.call(awaiting, takeover, () => performer.perform(awaiting, state), stopping);
      }
      const perform = () => this.deps.performer.perform(awaiting, state);
      // A tree past its root's cost or token budget makes no more model calls.
      const spent = awaiting.type === "callModel" ? await this.deps.spend?.refusal() : undefined;
      if (spent) return spent;
      const event = awaiting.type === "callModel" ? await this.deps.leases.call(perform) : await perform();
      await this.deps.spend?.charge(event);
      const lease = { deps: this.deps, journal: this.journal, log: () => this.log };
      return await handBackOnOutage(event, { state, since, takeover }, lease);
    } finally {
      timed();
    }
  }
}

/** The metric label of what a step waits on: `model`, `tool`, `critique`, `recallMemory`… */
function effectName(effect: AwaitingEffect): string {
  if (effect.type === "callModel") return "model";
  if (effect.type === "callTool") return effect.tool === SPAWN_TOOL ? "spawn" : "tool";
  return effect.type;
}
