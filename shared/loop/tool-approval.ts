import type { ErrorPayload } from "../contracts/common.js";
import { ToolApprovalRequest } from "../contracts/tool.js";
import { runNextTool, startActCall, toolError } from "./act.js";
import type { Draft } from "./draft.js";
import type { ApprovalCall, LoopConfig, Pending } from "./state.js";

/**
 * A tool refused an ACT call until a human approves it (APPROVAL_REQUIRED with a token). The run
 * parks in `awaiting_approval`, holding no worker, with the call kept in its pending state. Returns
 * false when the refusal carries no usable token: it is then an ordinary tool error.
 */
export function requestToolApproval(
  d: Draft,
  pending: Extract<Pending, { kind: "tool" }>,
  error: ErrorPayload,
): boolean {
  if (error.code !== "APPROVAL_REQUIRED" || pending.purpose !== "act") return false;
  const asked = ToolApprovalRequest.safeParse(error.details);
  if (!asked.success) return false;
  const s = d.state;
  s.invocations = s.invocations.map((inv) =>
    inv.actionId === pending.actionId ? { ...inv, ok: false, code: error.code } : inv,
  );
  const call: ApprovalCall = {
    tool: pending.tool,
    input: pending.input,
    actionId: pending.actionId,
    token: asked.data.token,
    ...(pending.callId === undefined ? {} : { callId: pending.callId }),
  };
  d.settle();
  s.status = "awaiting_approval";
  d.audit("approval.requested", "started", {
    actor: `tool:${pending.tool}`,
    reason: asked.data.reason,
    data: { on: "tool", tool: pending.tool, actionId: pending.actionId, token: asked.data.token },
  });
  d.await({ type: "requestApproval", reason: asked.data.reason }, { kind: "approval", on: "tool", call });
  return true;
}

/**
 * A human decided on a held tool call. Approved: the same call is made again as a new action (its
 * own INTENT and idempotency key) carrying the approval, which the tool checks against its token.
 * Rejected (or "modify"): the model is told the call was refused, with the human's words, and the
 * loop goes on; nothing ran.
 */
export function onToolApproval(
  d: Draft,
  config: LoopConfig,
  call: ApprovalCall,
  event: {
    decision: "approve" | "reject" | "modify";
    by: string;
    reason?: string | undefined;
    feedback?: string | undefined;
  },
): void {
  const s = d.state;
  const words = event.feedback ?? event.reason;
  const approved = event.decision === "approve";
  d.audit("approval.decided", approved ? "passed" : "failed", {
    actor: "human",
    ...(words ? { reason: words } : {}),
    data: { decision: event.decision, by: event.by, on: "tool", tool: call.tool, actionId: call.actionId },
  });
  d.settle();
  s.status = "running";
  const held = { id: call.callId ?? call.actionId, name: call.tool, input: call.input };
  if (!approved) {
    const why = `rejected by ${event.by}${words ? `: ${words}` : ""}`;
    toolError(d, held, `error [APPROVAL_REJECTED]: ${why}`);
    runNextTool(d, config);
    return;
  }
  startActCall(d, config, held, {
    token: call.token,
    by: event.by,
    decidedAt: d.at,
    heldAction: call.actionId,
    ...(words ? { reason: words } : {}),
  });
}
