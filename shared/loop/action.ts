import type { AuditKind } from "../contracts/audit.js";
import { DEFAULT_TOOL_TIMEOUT_MS, type ToolApproval, type ToolDescriptor } from "../contracts/tool.js";
import type { ActionPurpose } from "../contracts/wal.js";
import type { Draft } from "./draft.js";
import type { AwaitingEffect, LoopConfig, Pending } from "./state.js";

export function descriptorOf(config: LoopConfig, tool: string): ToolDescriptor | undefined {
  return config.tools.find((t) => t.name === tool);
}

/** The key a tool service records an action's result under: stable across retries and resumes. */
export function idempotencyKeyFor(runId: string, actionId: string): string {
  return `${runId}:${actionId}`;
}

export interface ActionStart {
  actionId: string;
  tool: string;
  input: unknown;
  purpose: ActionPurpose;
  audit: { kind: AuditKind; data: Record<string, unknown> };
  /** What the pending answer must be matched with (call id, verifier index, compensated action). */
  link?: Pick<Extract<Pending, { kind: "tool" }>, "callId" | "verifierIndex" | "compensates">;
  /** A human's approval the tool asked for, sent with the call. */
  approval?: ToolApproval;
}

type ToolCallEffect = Extract<AwaitingEffect, { type: "callTool" }>;
type ToolPending = Extract<Pending, { kind: "tool" }>;

/** A call whose INTENT is logged, and what the loop waits on when its turn comes. */
export interface LoggedAction {
  effect: ToolCallEffect;
  pending: ToolPending;
}

/**
 * Every tool call the runtime makes (to act, to verify, to compensate) starts the same way: its
 * INTENT is logged before anything runs, then it is audited, then the loop waits for its outcome.
 */
export function startAction(d: Draft, config: LoopConfig, action: ActionStart): void {
  const { effect, pending } = logAction(d, config, action);
  d.await(effect, pending);
}

/** An action's INTENT and audit, without waiting on it yet (see ActBatch). */
export function logAction(d: Draft, config: LoopConfig, action: ActionStart): LoggedAction {
  const { actionId, tool, input, purpose } = action;
  const idempotencyKey = idempotencyKeyFor(d.state.runId, actionId);
  const timeoutMs = descriptorOf(config, tool)?.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
  d.wal({ type: "INTENT", actionId, tool, input, idempotencyKey, purpose });
  d.audit(action.audit.kind, "started", { actor: `tool:${tool}`, data: action.audit.data });
  return {
    effect: {
      type: "callTool",
      actionId,
      tool,
      input,
      idempotencyKey,
      purpose,
      timeoutMs,
      ...(action.approval ? { approval: action.approval } : {}),
    },
    pending: { kind: "tool", actionId, tool, purpose, input, ...action.link },
  };
}
