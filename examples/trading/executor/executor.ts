import type { ToolApproval, ToolApprovalRequest, ToolAuditNote } from "../../../shared/contracts/tool.js";
import { contentHash } from "../../../shared/runtime/hash.js";
import type { TradingConfig } from "./config.js";
import type { CanonicalState, Step } from "./contract.js";
import type { ExecutorFunction, ExecutorRequest } from "./control-contract.js";
import { applyControl, approvalNeeded, approvalProblem, approvalToken, recordApproval } from "./controls.js";
import { dryRun, validate } from "./gates.js";
import { orderClientId, intentIdAt, planHash } from "./ids.js";
import { type MarketModel, round } from "./market.js";
import { execute, executionRefusal, verify } from "./orders.js";
import { replayRecord } from "./replay-record.js";
import {
  type Decision,
  type ExecutorState,
  KEEP_DECISIONS,
  KEEP_IDEMPOTENCY,
  Notes,
  canonicalState,
  effectiveConfig,
  enterTick,
  gateContext,
} from "./state.js";

export interface Outcome {
  state: ExecutorState;
  response: Record<string, unknown>;
  notes: ToolAuditNote[];
  /** Set when the call needs a human's approval first: nothing happened, the state is unchanged. */
  approval?: ToolApprovalRequest;
}

const STEP_OF: Record<ExecutorFunction, Step> = {
  get_canonical_state: "PLAN",
  get_market_snapshot: "PLAN",
  validate_plan: "VALIDATE",
  dry_run_plan: "DRY_RUN",
  execute_plan: "EXECUTE",
  verify_execution: "VERIFY",
  record_decision: "RECORD",
  set_kill_switch: "CONTROL",
  apply_control_change: "CONTROL",
};

/** The response a function gives when it refuses: its own shape, status "error", the reasons. */
function refusal(
  fn: ExecutorFunction,
  errors: string[],
  ref: string,
  state: ExecutorState,
): Record<string, unknown> {
  const base = { status: "error", errors, audit_ref: ref };
  switch (fn) {
    case "validate_plan":
      return { ...base, validation: { pass: false, checks: [], blocking_reasons: errors } };
    case "dry_run_plan":
      return {
        ...base,
        dry_run: { pass: false, projected: [], idempotency_conflicts: [], blocking_reasons: errors },
      };
    case "execute_plan":
      return { ...base, execution: [] };
    case "verify_execution":
      return { ...base, verification: { overall: "uncertain", orders: [], drift_reasons: errors } };
    case "record_decision":
      return { ...base, ledger_ref: "" };
    case "set_kill_switch":
      return { ...base, kill_switch_active: state.flags.kill_switch_active };
    case "get_market_snapshot":
      return { ...base, market: [] };
    case "get_canonical_state":
      return base;
    case "apply_control_change":
      return { ...base, applied: false, approved_by: null };
  }
}

/** The note of a gate over a plan: passed, or failed with its blocking reasons. */
function gateNote(
  notes: Notes,
  step: "VALIDATE" | "DRY_RUN",
  result: { pass: boolean; blocking_reasons: string[] },
  passed: string,
  hash: string,
): void {
  const reason = result.pass ? passed : result.blocking_reasons.join("; ");
  notes.add(step, result.pass ? "passed" : "failed", reason, { artifacts: [`plan:${hash.slice(0, 16)}`] });
}

function decisionFor(state: ExecutorState, decisionId: string, tickId: string): Decision | string {
  const known = state.decisions[decisionId];
  if (known)
    return known.tick_id === tickId ? known : `decision '${decisionId}' belongs to tick '${known.tick_id}'`;
  const created: Decision = {
    tick_id: tickId,
    validated: {},
    dry_run: {},
    orders: [],
    verification: null,
    ledger_ref: null,
  };
  state.decisions[decisionId] = created;
  state.decision_order.push(decisionId);
  for (const old of state.decision_order.splice(0, Math.max(0, state.decision_order.length - KEEP_DECISIONS)))
    delete state.decisions[old];
  return created;
}

type Handler<F extends ExecutorFunction> = (
  state: ExecutorState,
  request: ExecutorRequest<F>,
  ctx: HandlerContext,
) => Record<string, unknown>;

interface HandlerContext {
  config: TradingConfig;
  market: MarketModel;
  notes: Notes;
  approval: ToolApproval | undefined;
  /** The call's time as RFC 3339, when the shell gave one. */
  at: string | undefined;
}

/** Notes what a decision was made from (the seed's replay inputs), when the call names a decision. */
function noteInput(
  state: ExecutorState,
  request: { decision_id: string; tick_id: string },
  input: Record<string, string>,
): void {
  const decision = decisionFor(state, request.decision_id, request.tick_id);
  if (typeof decision !== "string") decision.inputs = { ...decision.inputs, ...input };
}

const handlers: { [F in ExecutorFunction]: Handler<F> } = {
  get_canonical_state: (state, request, { config, market, notes }) => {
    const snapshot = canonicalState(state, config, market);
    const stateHash = contentHash(snapshot);
    noteInput(state, request, { state_hash: stateHash });
    const decision = state.decisions[request.decision_id];
    if (decision) decision.planned_at = request.as_of;
    notes.add("PLAN", "passed", "canonical state read", { artifacts: [`state:${stateHash.slice(0, 16)}`] });
    return { status: "ok", state: snapshot, errors: [] };
  },
  get_market_snapshot: (state, request, { market, notes }) => {
    const errors: string[] = [];
    const quotes = request.symbols.flatMap((symbol) => {
      if (!market.isListed(symbol)) {
        errors.push(`UNKNOWN_SYMBOL: ${symbol}`);
        return [];
      }
      const quote = market.quote(symbol, state.tick);
      if (quote.staleness_sec > request.max_staleness_sec)
        errors.push(`STALE: ${symbol} is ${quote.staleness_sec}s old`);
      return [quote];
    });
    const marketHash = contentHash(quotes);
    noteInput(state, request, { market_hash: marketHash });
    notes.add("PLAN", "passed", `market snapshot of ${quotes.length} symbol(s)`, {
      artifacts: [`market:${marketHash.slice(0, 16)}`],
    });
    return { status: "ok", market: quotes, errors };
  },
  validate_plan: (state, request, { config, market, notes }) => {
    const decision = decisionFor(state, request.decision_id, request.tick_id);
    if (typeof decision === "string")
      return refusal("validate_plan", [`CORRELATION_MISMATCH: ${decision}`], notes.ref(), state);
    const hash = planHash(request.plan.intents);
    notes.add("PLAN", "passed", request.plan.reason || "plan created", {
      actor: "planner",
      artifacts: [`plan:${hash.slice(0, 16)}`],
    });
    const validation = validate(request.plan.intents, gateContext(state, config, market));
    decision.validated[hash] = validation.pass;
    gateNote(notes, "VALIDATE", validation, "all gates passed", hash);
    return { status: "ok", validation, errors: [] };
  },
  dry_run_plan: (state, request, { config, market, notes }) => {
    const decision = state.decisions[request.decision_id];
    const hash = planHash(request.plan.intents);
    if (decision?.tick_id !== request.tick_id || decision.validated[hash] !== true)
      return refusal(
        "dry_run_plan",
        [`GATES_MISSING: plan ${hash.slice(0, 12)} has no passing validation in this decision`],
        notes.ref(),
        state,
      );
    const conflicts = request.plan.intents
      .map((intent, index) => orderClientId(request.decision_id, { ...intent, intent_id: intentIdAt(index) }))
      .filter((id) => state.orders[id] !== undefined);
    const result = dryRun(
      request.plan.intents,
      request.assumptions,
      gateContext(state, config, market),
      conflicts,
    );
    decision.dry_run[hash] = result.pass;
    gateNote(notes, "DRY_RUN", result, "dry run passed", hash);
    return { status: "ok", dry_run: result, errors: [] };
  },
  execute_plan: (state, request, { config, market, notes, at }) => {
    const refused = executionRefusal(state, request, config, market);
    if (refused.length > 0) {
      notes.add("EXECUTE", "failed", refused.join("; "));
      return refusal("execute_plan", refused, notes.ref(), state);
    }
    const entries = execute(state, request, config, market);
    const decision = state.decisions[request.decision_id];
    if (decision && at) decision.executed_at = at;
    const settled = entries.every((e) => e.submit_status === "acked");
    notes.add(
      "EXECUTE",
      settled ? "passed" : "failed",
      entries.map((e) => `${e.intent_id}:${e.submit_status}`).join(", "),
      {
        artifacts: entries.map((e) => e.order_client_id),
      },
    );
    return { status: settled ? "ok" : "partial", execution: entries, errors: [] };
  },
  verify_execution: (state, request, { config, market, notes }) => {
    const verification = verify(state, request.order_client_ids, config, market, notes);
    const decision = state.decisions[request.decision_id];
    if (decision) decision.verification = verification.overall;
    const clean = verification.overall === "matched";
    notes.add(
      "VERIFY",
      clean ? "passed" : "failed",
      clean ? "venue matches the book" : verification.drift_reasons.join("; "),
      {
        artifacts: verification.orders.map((o) => o.order_client_id),
      },
    );
    if (!clean) {
      state.flags.new_entries_halted = true;
      notes.add(
        "VERIFY",
        "failed",
        `SAFE_RECOVERY: ${verification.overall}; new entries halted until reconciled`,
        { critical: true },
      );
    } else if (Object.keys(state.unresolved).length === 0 && state.flags.new_entries_halted) {
      state.flags.new_entries_halted = false;
      notes.add("VERIFY", "passed", "reconciled: new entries allowed again");
    }
    return { status: "ok", verification, errors: [] };
  },
  record_decision: (state, request, { config, market, notes }) => {
    const decision = decisionFor(state, request.decision_id, request.tick_id);
    if (typeof decision === "string")
      return refusal("record_decision", [`CORRELATION_MISMATCH: ${decision}`], notes.ref(), state);
    state.records += 1;
    decision.ledger_ref = decision.ledger_ref ?? `ledger-${state.records}`;
    notes.add("RECORD", "passed", request.record.plan_summary || "decision recorded", {
      artifacts: [decision.ledger_ref],
      extra: {
        record: request.record,
        replay_record: replayRecord(request, decision, config),
        ledger: ledgerSummary(canonicalState(state, config, market)),
      },
    });
    return { status: "ok", ledger_ref: decision.ledger_ref, errors: [] };
  },
  set_kill_switch: (state, request, { notes, approval }) => {
    if (request.active) {
      state.flags.kill_switch_active = true;
      state.flags.critical = state.flags.critical ?? `kill switch set by ${request.actor}: ${request.reason}`;
      notes.add("CONTROL", "passed", `kill switch on: ${request.reason}`, {
        actor: request.actor,
        critical: true,
      });
      return { status: "ok", kill_switch_active: true, errors: [] };
    }
    if (!state.flags.kill_switch_active) {
      notes.add("CONTROL", "skipped", "kill switch already off", { actor: request.actor });
      return { status: "ok", kill_switch_active: false, errors: [] };
    }
    // handle() lets this through only with a valid human approval.
    const by = approval?.by ?? "unknown";
    const cleared = state.flags.critical;
    state.flags = { ...state.flags, kill_switch_active: false, critical: null };
    state.consecutive_errors = 0;
    if (approval) recordApproval(state, approval, "kill_switch_off", request.decision_id);
    notes.add("CONTROL", "passed", `kill switch off, approved by ${by}: ${request.reason}`, {
      actor: "human",
      critical: true,
      extra: { approved_by: by, requested_by: request.actor, cleared },
    });
    return { status: "ok", kill_switch_active: false, errors: [] };
  },
  apply_control_change: (state, request, { config, notes, approval }) =>
    applyControl(state, request, config, { notes, approval }),
};

/** What the RECORD audit note carries of the book after the decision (for dashboards and the demo). */
function ledgerSummary(view: CanonicalState): Record<string, unknown> {
  const cash = view.balances.reduce((sum, b) => sum + b.free + b.locked, 0);
  return {
    equity: round(cash + view.positions.reduce((sum, p) => sum + p.notional, 0), 2),
    pnl: view.pnl,
    treasury: view.treasury,
    positions: view.positions.map((p) => ({ symbol: p.symbol, qty: p.qty })),
    kill_switch_active: view.runtime_flags.kill_switch_active,
  };
}

/** Raises each mandatory stop-trading condition once while it holds (a critical audit note). */
function raiseStops(state: ExecutorState, config: TradingConfig, market: MarketModel, notes: Notes): void {
  const now = gateContext(state, config, market).stops;
  const name = (stop: string): string => stop.split(" (")[0] ?? stop;
  for (const stop of now.filter((s) => !state.stops.includes(name(s)) && !state.suppressed.includes(name(s))))
    notes.add("CONTROL", "failed", `STOP_TRADING: ${stop}`, { critical: true });
  state.stops = now.map(name);
}

/** Consecutive refusals are the policy handler's signal: past the limit, the kill switch goes on. */
function policy(
  state: ExecutorState,
  response: Record<string, unknown>,
  config: TradingConfig,
  notes: Notes,
): void {
  if (response.status !== "error") {
    state.consecutive_errors = 0;
    return;
  }
  state.consecutive_errors += 1;
  if (state.consecutive_errors >= config.max_consecutive_errors && !state.flags.kill_switch_active) {
    state.flags.kill_switch_active = true;
    state.flags.critical = `${state.consecutive_errors} errors in a row`;
    notes.add("CONTROL", "failed", `ERROR_EVENT: ${state.flags.critical}; kill switch on`, {
      critical: true,
    });
  }
}

/**
 * One call of one function, pure: (state, request) → (state, response, audit notes). A repeated
 * idempotency key with the same payload answers the recorded response; with another payload it is
 * refused. A call that needs a human's approval and carries none changes nothing and says so
 * (`approval`); with an approval, it must be the one for exactly this call, and is honoured once.
 * Control functions are not tick-bound: they never advance the venue.
 */
export function handle<F extends ExecutorFunction>(
  current: ExecutorState,
  fn: F,
  request: ExecutorRequest<F>,
  base: TradingConfig,
  market: MarketModel,
  options: { approval?: ToolApproval; at?: number } = {},
): Outcome {
  const approval = options.approval;
  const at = options.at === undefined ? undefined : new Date(options.at).toISOString();
  const config = effectiveConfig(base, current);
  const hash = contentHash({ fn, request });
  const prior = current.idem[request.idempotency_key];
  if (prior?.hash === hash)
    return { state: current, response: prior.response as Record<string, unknown>, notes: [] };
  const needed = prior ? undefined : approvalNeeded(fn, request, current, config);
  const token = needed === undefined ? undefined : approvalToken(fn, request, current);
  if (needed !== undefined && token !== undefined && !approval) {
    const response = refusal(fn, [`APPROVAL_REQUIRED: ${needed}`], "", current);
    return { state: current, response, notes: [], approval: { token, reason: needed } };
  }
  const state = structuredClone(current);
  const notes = new Notes(state, request);
  const refused = prior
    ? `IDEMPOTENCY_KEY_REUSED: key '${request.idempotency_key}' was used with another payload`
    : token && approval
      ? approvalProblem(state, token, approval)
      : undefined;
  const late =
    refused || STEP_OF[fn] === "CONTROL" ? undefined : enterTick(state, request.tick_id, config, market);
  let response: Record<string, unknown>;
  if (refused ?? late) {
    const why = refused ?? `TICK_OVER: ${late ?? ""}`;
    notes.add(STEP_OF[fn], "failed", why);
    response = refusal(fn, [why], notes.ref(), state);
  } else {
    response = (handlers[fn] as Handler<F>)(state, request, { config, market, notes, approval, at });
    response = { ...response, audit_ref: notes.ref() };
  }
  // An approved control change applies from this call on: stops are judged under it.
  const now = effectiveConfig(base, state);
  raiseStops(state, now, market, notes);
  policy(state, response, now, notes);
  if (!prior) remember(state, request.idempotency_key, hash, response);
  return { state, response, notes: notes.notes };
}

function remember(state: ExecutorState, key: string, hash: string, response: Record<string, unknown>): void {
  state.idem[key] = { hash, response };
  state.idem_order.push(key);
  for (const old of state.idem_order.splice(0, Math.max(0, state.idem_order.length - KEEP_IDEMPOTENCY)))
    delete state.idem[old];
}
