import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { isFinished } from "../../shared/contracts/run-status.js";
import type { RedactionConfig } from "../../shared/contracts/redaction.js";
import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { runRedactedInputs, type RedactedInputs } from "../../shared/bus/redacted-inputs.js";
import type { Effect, LoopState } from "../../shared/loop/state.js";
import { AgentError } from "../../shared/runtime/errors.js";
import type { Logger } from "../../shared/runtime/logger.js";
import {
  redactEvent,
  redactionPolicy,
  redactSettlement,
  withoutNotes,
  type RedactionPolicy,
} from "../../shared/tools/redact-event.js";
import { holdsRedaction } from "../../shared/tools/redaction.js";

type ToolCallEffect = Extract<Effect, { type: "callTool" }>;

/** The tool call an action of the run answers to: the pending one, or one of its batch. */
function pendingCall(state: LoopState, actionId: string): { tool: string; callId?: string } | undefined {
  const pending = state.pending;
  if (pending?.kind === "tool" && pending.actionId === actionId) return pending;
  return state.batched?.find((b) => b.pending.actionId === actionId)?.pending;
}

/**
 * A call's key: the model's call id within its iteration. Ids are unique within a response only (a
 * provider may number each turn's calls from `call_0`), and a response's calls all run in the
 * iteration that asked for them.
 */
function callKey(iteration: number, callId: string): string {
  return `${iteration}:${callId}`;
}

/** The call a pending action answers to, keyed (see callKey). */
function pendingKey(state: LoopState, actionId: string): string | undefined {
  const callId = pendingCall(state, actionId)?.callId;
  return callId === undefined ? undefined : callKey(state.guard.iteration, callId);
}

/** The tool call a halted run waited on (what a resume or a cancel settles). */
function waitedCall(state: LoopState): { tool: string; actionId: string } | undefined {
  const pending = state.phase === "HALT" ? state.haltedFrom?.pending : state.pending;
  return pending?.kind === "tool" ? pending : undefined;
}

/**
 * The model's id of the call an event settles for good, if any: an answer (a tool's refusal pending
 * a human's approval is none), or a human's rejection of the call held for approval.
 */
function settledCall(state: LoopState, event: LoopEvent): string | undefined {
  if (
    event.type === "toolCompleted" ||
    (event.type === "toolAborted" && event.error.code !== "APPROVAL_REQUIRED")
  )
    return pendingKey(state, event.actionId);
  const pending = state.pending;
  if (event.type !== "approvalDecided" || event.decision !== "reject") return undefined;
  const callId = pending?.kind === "approval" && pending.on === "tool" ? pending.call.callId : undefined;
  return callId === undefined ? undefined : callKey(state.guard.iteration, callId);
}

/**
 * One lease's redaction (see docs/redaction.md). Events from outside the loop are redacted before
 * the loop sees them, so the log, the checkpoints and what the model is shown later hold only
 * redacted values, and a replay or a resume from the log needs none of them. The inputs the
 * redaction changed are kept outside the log (RedactedInputs) before their calls' INTENTs are
 * written (see flush), and forgotten once the record settling their calls (an answer, a rejection,
 * the run's end) is durable (see durable): whichever lease sends a call
 * sends it with the model's own input, or not at all (REDACTED_INPUT_LOST), never with the
 * redacted text.
 */
export class LeaseRedaction {
  private policy: RedactionPolicy | undefined;
  /** Inputs as the model gave them, by call (see callKey). */
  private readonly originals = new Map<string, unknown>();
  /** Originals not yet kept outside the log. */
  private readonly unkept = new Map<string, unknown>();
  /** Calls settled by events not yet recorded, and by records not yet durable: to be forgotten. */
  private readonly answered = new Set<string>();
  private readonly written = new Set<string>();
  private readonly settled = new Set<string>();
  /** Call ids of the model responses seen (redacted or read from the log), and those whose input was redacted. */
  private readonly seen = new Set<string>();
  private readonly noted = new Set<string>();
  /** The events this lease redacted: redacted again, they would lose the notes of what a pattern took. */
  private readonly redacted = new WeakSet<LoopEvent>();

  constructor(
    private readonly config: RedactionConfig | undefined,
    /** Where the originals are kept for other leases; absent: in this lease's memory only. */
    private readonly store?: RedactedInputs,
  ) {}

  /** A lease of `runId`'s: the originals it redacts are kept in the bus's redacted-inputs bucket. */
  static ofRun(
    config: RedactionConfig | undefined,
    bus: Pick<ActorBus, "buckets" | "clock" | "random">,
    runId: string,
  ): LeaseRedaction {
    return new LeaseRedaction(config, runRedactedInputs(bus.buckets.redactedInputs, runId, bus));
  }

  /** The run's tools, as discovered: their descriptors' rules and the operators' apply from now on. */
  use(tools: readonly ToolDescriptor[]): void {
    // No rule anywhere, the common case: every event passes as it is, at no cost per step.
    const ruled = this.config !== undefined || tools.some((t) => t.redact !== undefined);
    this.policy = ruled ? redactionPolicy(tools, this.config) : undefined;
  }

  /** The run's log as read: which of its calls' inputs its model responses' notes say were redacted. */
  learn(records: readonly WalRecord[]): void {
    for (const record of records) if (record.type === "MODEL") this.note(record.event, record.iteration);
  }

  private note(event: LoopEvent, iteration: number): void {
    if (event.type !== "modelResponded") return;
    for (const call of event.response.toolCalls) this.seen.add(callKey(iteration, call.id));
    for (const note of event.redactions ?? [])
      if (note.field === "input" && note.callId !== undefined)
        this.noted.add(callKey(iteration, note.callId));
  }

  /** The event as the loop (and so the log) is to see it. */
  event(state: LoopState, event: LoopEvent): LoopEvent {
    if (this.redacted.has(event)) return event;
    if (!this.policy) return withoutNotes(event);
    const redacted = redactEvent(
      withoutNotes(event),
      this.policy,
      (actionId) => pendingCall(state, actionId)?.tool,
    );
    // A response's state holds the iteration that asked for it (see callKey).
    const iteration = state.guard.iteration;
    for (const [callId, input] of redacted.originals) {
      this.originals.set(callKey(iteration, callId), input);
      this.unkept.set(callKey(iteration, callId), input);
    }
    this.note(redacted.event, iteration);
    const callId = settledCall(state, event);
    if (callId !== undefined && (this.originals.delete(callId) || this.noted.has(callId)))
      this.answered.add(callId);
    const settled = redactSettlement(redacted.event, this.policy, waitedCall(state));
    this.redacted.add(settled);
    return settled;
  }

  /** Keeps the originals of the last event outside the log, before the INTENTs of their calls are written. */
  async flush(): Promise<void> {
    if (!this.store) return;
    for (const [callId, input] of this.unkept) {
      await this.store.keep(callId, input);
      this.unkept.delete(callId);
    }
  }

  /**
   * The transition settling the calls answered since is handed to the journal; one ending the run
   * settles every call whose input was redacted (a call never sent, or held for an approval).
   */
  recorded(state: LoopState): void {
    for (const callId of this.answered) this.settle(callId);
    this.answered.clear();
    if (!isFinished(state)) return;
    for (const callId of [...this.originals.keys(), ...this.noted]) this.settle(callId);
    this.originals.clear();
  }

  private settle(callId: string): void {
    if (this.settled.has(callId)) return;
    this.settled.add(callId);
    this.written.add(callId);
  }

  /**
   * The records handed to the journal are durable: the inputs of the calls they settle are
   * forgotten. Only now: a successor reading a log without the answer sends the call again, with
   * the kept input. A purge that fails leaves the input to the bucket's max_age; the run goes on.
   * `log` is called only to write a line: most appends leave nothing to forget.
   */
  async durable(log: () => Logger): Promise<void> {
    if (!this.store) return this.written.clear();
    for (const call of this.written) {
      this.written.delete(call);
      try {
        await this.store.forget(call);
      } catch (err) {
        log().warn({ err, call }, "a redacted input could not be forgotten: the bucket's max_age removes it");
      }
    }
  }

  /**
   * The input to send a call with: the model's own when its input was redacted (this lease's, or
   * kept outside the log by the lease that redacted it). A call whose redacted input is nowhere
   * to be found is not sent (REDACTED_INPUT_LOST).
   */
  async input(effect: ToolCallEffect, state: LoopState): Promise<unknown> {
    const callId = pendingKey(state, effect.actionId);
    if (callId !== undefined && this.originals.has(callId)) return this.originals.get(callId);
    if (!this.policy?.rulesFor(effect.tool)) return effect.input;
    // Decided by the log's note of the call, when it was read: a model's input may hold the marker.
    if (callId !== undefined && this.seen.has(callId) && !this.noted.has(callId)) return effect.input;
    const kept = callId === undefined ? undefined : await this.store?.read(callId);
    if (kept && callId !== undefined) {
      this.originals.set(callId, kept.input);
      return kept.input;
    }
    // A call with no note read (its response before the checkpoint the lease read from, or a
    // compensation quoting an input) is judged by its text: it is never sent with a redaction in it.
    const lost = callId !== undefined && this.noted.has(callId);
    if (!lost && !holdsRedaction(effect.input)) return effect.input;
    throw new AgentError(
      "REDACTED_INPUT_LOST",
      `the input of this '${effect.tool}' call held redacted fields, whose values are no longer kept (the run's log keeps them out; they are kept outside it until the call is answered, or the redacted-inputs bucket's max_age passes): it was not sent: make the call again`,
    );
  }
}
