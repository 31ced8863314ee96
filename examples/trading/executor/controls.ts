import type { ToolApproval } from "../../../shared/contracts/tool.js";
import { contentHash } from "../../../shared/runtime/hash.js";
import type { TradingConfig } from "./config.js";
import type {
  ApplyControlChangeRequest,
  ControlChange,
  ExecutorFunction,
  ExecutorRequest,
} from "./control-contract.js";
import { round } from "./market.js";
import type { ApprovalRecord, ExecutorState, Notes } from "./state.js";

const KEEP_APPROVALS = 64;

/**
 * Why this call needs a human's approval (the seed's six actions), or undefined. Turning the kill
 * switch off after the critical event that set it, live mode either way, hard limits, strategy or
 * universe changes, suppressing a critical alert, and treasury transfers above the threshold.
 */
export function approvalNeeded<F extends ExecutorFunction>(
  fn: F,
  request: ExecutorRequest<F>,
  state: ExecutorState,
  config: TradingConfig,
): string | undefined {
  if (fn === "set_kill_switch") {
    const r = request as ExecutorRequest<"set_kill_switch">;
    if (r.active || !state.flags.kill_switch_active) return undefined;
    return `turning the kill switch off after a critical event (${state.flags.critical ?? "unrecorded"})`;
  }
  if (fn !== "apply_control_change") return undefined;
  const change = (request as ApplyControlChangeRequest).change;
  switch (change.kind) {
    case "mode":
      return `${change.mode === "live" ? "enabling" : "disabling"} live mode (to '${change.mode}')`;
    case "risk_limits":
      return `changing hard risk limits: ${describe(change.limits)}`;
    case "strategy":
      return `changing the strategy family or symbol universe: ${describe(change)}`;
    case "alert_override":
      return change.suppress ? `suppressing the critical alert '${change.alert}'` : undefined;
    case "treasury_transfer":
      return change.amount > config.treasury.transfer_approval_threshold
        ? `a treasury transfer of ${change.amount} (${change.direction}) above the ${config.treasury.transfer_approval_threshold} threshold`
        : undefined;
  }
}

function describe(value: object): string {
  return Object.entries(value)
    .filter(([k]) => k !== "kind")
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(", ");
}

/**
 * Names exactly what a human approves: this function and request (its idempotency key aside) and,
 * for the kill switch, the critical event it answers. The approved call must match it.
 */
export function approvalToken<F extends ExecutorFunction>(
  fn: F,
  request: ExecutorRequest<F>,
  state: ExecutorState,
): string {
  const { idempotency_key: _key, ...rest } = request;
  const about = fn === "set_kill_switch" ? state.flags.critical : null;
  return `appr-${contentHash({ fn, request: rest, about }).slice(0, 32)}`;
}

/** Why a presented approval cannot be honoured, or undefined. */
export function approvalProblem(
  state: ExecutorState,
  token: string,
  approval: ToolApproval,
): string | undefined {
  if (approval.token !== token) return "APPROVAL_INVALID: the approval names another action";
  if (state.approvals.some((a) => a.token === token))
    return "APPROVAL_USED: this approval was already acted on";
  return undefined;
}

export function recordApproval(
  state: ExecutorState,
  approval: ToolApproval,
  action: string,
  decisionId: string,
): void {
  const entry: ApprovalRecord = {
    token: approval.token,
    by: approval.by,
    decided_at: approval.decidedAt,
    action,
    decision_id: decisionId,
    tick: state.tick,
  };
  state.approvals = [...state.approvals, entry].slice(-KEEP_APPROVALS);
}

/** Carries out an operator's change (approved when it had to be); the response says what happened. */
export function applyControl(
  state: ExecutorState,
  request: ApplyControlChangeRequest,
  config: TradingConfig,
  ctx: { notes: Notes; approval: ToolApproval | undefined },
): Record<string, unknown> {
  const change = request.change;
  const refused = changeProblem(state, change, config);
  const by = ctx.approval?.by ?? null;
  const who = { actor: "human", extra: { requested_by: request.requested_by, approved_by: by } };
  if (refused) {
    ctx.notes.add("CONTROL", "failed", refused, who);
    return { status: "error", applied: false, approved_by: null, errors: [refused] };
  }
  carryOut(state, change);
  if (ctx.approval) recordApproval(state, ctx.approval, `${change.kind}`, request.decision_id);
  const what = `${change.kind}: ${describe(change)}${by ? `, approved by ${by}` : ""} (${request.reason})`;
  ctx.notes.add("CONTROL", "passed", what, { ...who, critical: change.kind === "mode" });
  return { status: "ok", applied: true, approved_by: by, errors: [] };
}

function changeProblem(
  state: ExecutorState,
  change: ControlChange,
  config: TradingConfig,
): string | undefined {
  if (change.kind === "strategy" && change.universe) {
    const listed = new Set(config.symbols.map((s) => s.symbol));
    const unknown = change.universe.filter((s) => !listed.has(s));
    if (unknown.length > 0) return `UNKNOWN_SYMBOL: ${unknown.join(", ")} not listed on the venue`;
  }
  if (change.kind === "treasury_transfer") {
    const l = state.ledger;
    const available = change.direction === "to_operating" ? l.cash - l.locked : l.operating_cash;
    if (change.amount > available + 1e-9)
      return `INSUFFICIENT_FUNDS: ${change.amount} asked, ${round(available, 2)} available`;
  }
  return undefined;
}

function carryOut(state: ExecutorState, change: ControlChange): void {
  const o = state.overrides;
  switch (change.kind) {
    case "mode":
      state.overrides = { ...o, mode: change.mode };
      return;
    case "risk_limits":
      state.overrides = { ...o, risk_limits: { ...o.risk_limits, ...change.limits } };
      return;
    case "strategy":
      state.overrides = {
        ...o,
        policy: {
          ...o.policy,
          ...(change.allowed_strategies ? { allowed_strategies: change.allowed_strategies } : {}),
          ...(change.universe ? { universe: change.universe } : {}),
        },
      };
      return;
    case "alert_override":
      state.suppressed = change.suppress
        ? [...new Set([...state.suppressed, change.alert])]
        : state.suppressed.filter((a) => a !== change.alert);
      return;
    case "treasury_transfer": {
      // Moving cash is not a gain or a loss: the day's start and the peak move with it.
      const delta = change.direction === "to_operating" ? -change.amount : change.amount;
      const l = state.ledger;
      state.ledger = {
        ...l,
        cash: round(l.cash + delta, 6),
        operating_cash: round(l.operating_cash - delta, 6),
        equity_peak: round(l.equity_peak + delta, 6),
        equity_day_start: round(l.equity_day_start + delta, 6),
      };
    }
  }
}
