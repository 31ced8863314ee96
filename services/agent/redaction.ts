import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import type { RedactionConfig } from "../../shared/contracts/redaction.js";
import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import type { Effect, LoopState } from "../../shared/loop/state.js";
import { AgentError } from "../../shared/runtime/errors.js";
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

/** The tool call a halted run waited on (what a resume or a cancel settles). */
function waitedCall(state: LoopState): { tool: string; actionId: string } | undefined {
  const pending = state.phase === "HALT" ? state.haltedFrom?.pending : state.pending;
  return pending?.kind === "tool" ? pending : undefined;
}

/**
 * One lease's redaction (see docs/redaction.md). Events from outside the loop are redacted before
 * the loop sees them, so the log, the checkpoints and what the model is shown later hold only
 * redacted values, and a replay or a resume from the log needs none of them. The inputs the
 * redaction changed are kept here, in memory, for the calls this lease sends; a call sent again by
 * a lease that never had them is not sent (REDACTED_INPUT_LOST), never sent with the redacted text.
 */
export class LeaseRedaction {
  private policy: RedactionPolicy | undefined;
  /** Inputs as the model gave them, by the model's call id. */
  private readonly originals = new Map<string, unknown>();
  /** The events this lease redacted: redacted again, they would lose the notes of what a pattern took. */
  private readonly redacted = new WeakSet<LoopEvent>();

  constructor(private readonly config: RedactionConfig | undefined) {}

  /** The run's tools, as discovered: their descriptors' rules and the operators' apply from now on. */
  use(tools: readonly ToolDescriptor[]): void {
    this.policy = redactionPolicy(tools, this.config);
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
    for (const [callId, input] of redacted.originals) this.originals.set(callId, input);
    // An answered call is not sent again by this lease: its input need not be kept any longer.
    if (event.type === "toolCompleted" || event.type === "toolAborted") {
      const callId = pendingCall(state, event.actionId)?.callId;
      if (callId !== undefined) this.originals.delete(callId);
    }
    const settled = redactSettlement(redacted.event, this.policy, waitedCall(state));
    this.redacted.add(settled);
    return settled;
  }

  /** The input to send a call with: the model's own when this lease redacted it. */
  input(effect: ToolCallEffect, state: LoopState): unknown {
    const callId = pendingCall(state, effect.actionId)?.callId;
    if (callId !== undefined && this.originals.has(callId)) return this.originals.get(callId);
    if (!this.policy?.rulesFor(effect.tool) || !holdsRedaction(effect.input)) return effect.input;
    throw new AgentError(
      "REDACTED_INPUT_LOST",
      `the input of this '${effect.tool}' call held redacted fields, whose values only the worker that received them had (the run's log keeps them out); it was not sent: make the call again`,
    );
  }
}
