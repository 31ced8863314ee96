import { z } from "zod";
import { decodeText } from "../../../shared/bus/codec.js";
import type { Message, ModelRequest, ModelResponse, ToolCall } from "../../../shared/contracts/model.js";
import { AgentError } from "../../../shared/runtime/errors.js";
import type { CanonicalState, Plan, PlanIntent, Quote } from "../executor/contract.js";
import { intentIdAt, orderClientId } from "../executor/ids.js";
import { round } from "../executor/market.js";
import { type TickOutcome, TickTask } from "./tick.js";

/** Strategy knobs of the deterministic planner (part of its identity: same knobs, same plans). */
export const STRATEGY = {
  id: "rebalance-v1",
  /** Share of equity one new position gets. */
  position_share: 0.05,
  take_profit: 0.01,
  stop_loss: 0.015,
  limit_buffer: 0.001,
  max_adjustments: 2,
  assumptions: { slippage_bps: 5, fee_bps: 10 },
  /** The planner sizes as the executor's self-financing rules will judge (it cannot loosen them). */
  min_runway_days: 30,
  target_surplus: 500,
  high_vol_1m: 0.03,
} as const;

/** The seed's risk scaling, read from the canonical state: factor, and whether high-vol symbols are allowed. */
export function sizing(state: CanonicalState): { factor: number; highVol: boolean } {
  const { rolling_surplus_30d: surplus, runway_days: runway } = state.treasury;
  if (surplus < 0 || runway < STRATEGY.min_runway_days) return { factor: 0.25, highVol: false };
  if (surplus < STRATEGY.target_surplus) return { factor: 0.75, highVol: true };
  return { factor: 1, highVol: true };
}

const ToolBody = z.record(z.string(), z.unknown());

interface Turn {
  call: ToolCall;
  result: { ok: boolean; body: Record<string, unknown> } | undefined;
}

/** The conversation as (call, result) pairs, oldest first. */
function turns(messages: readonly Message[]): Turn[] {
  const results = new Map<string, { ok: boolean; body: Record<string, unknown> }>();
  for (const m of messages) {
    if (m.role !== "tool") continue;
    let body: Record<string, unknown>;
    try {
      body = decodeText(ToolBody, m.content);
    } catch {
      // An error result is plain text ("error [CODE] message"), not the executor's JSON.
      body = { error: m.content };
    }
    results.set(m.toolCallId, { ok: !m.isError && body.status !== "error", body });
  }
  return messages.flatMap((m) =>
    m.role === "assistant" ? (m.toolCalls ?? []).map((call) => ({ call, result: results.get(call.id) })) : [],
  );
}

const last = (history: Turn[], name: string): Turn | undefined =>
  history.findLast((t) => t.call.name === name);

/**
 * The plan for this tick, from the canonical state and the market: close positions that reached
 * their take-profit or stop-loss, and open one new position in the tightest-spread symbol not held.
 * Everything it reads is in the conversation, so the same inputs give the same plan.
 */
export function planFor(state: CanonicalState, market: Quote[], scale = 1): Plan {
  const intents: PlanIntent[] = [];
  const quotes = new Map(market.map((q) => [q.symbol, q]));
  for (const p of state.positions) {
    const q = quotes.get(p.symbol);
    if (!q || q.halted) continue;
    const move = q.mid / p.avg_price - 1;
    if (move >= STRATEGY.take_profit || move <= -STRATEGY.stop_loss)
      intents.push(intent(p.symbol, "sell", p.qty, q.best_bid * (1 - STRATEGY.limit_buffer), move));
  }
  const held = new Set(state.positions.map((p) => p.symbol));
  const equity = (state.balances[0]?.free ?? 0) + state.positions.reduce((s, p) => s + p.notional, 0);
  const size = sizing(state);
  const candidates = market
    .filter((q) => !held.has(q.symbol) && !q.halted && (size.highVol || q.vol_1m <= STRATEGY.high_vol_1m))
    .sort((a, b) => a.spread_bps - b.spread_bps);
  const pick = candidates[0];
  if (pick && !state.runtime_flags.kill_switch_active) {
    const notional =
      Math.min(equity * STRATEGY.position_share, state.risk_limits.max_notional_per_trade * 0.9) *
      scale *
      size.factor;
    const qty = round(notional / pick.best_ask, 6);
    if (qty > 0)
      intents.push(intent(pick.symbol, "buy", qty, pick.best_ask * (1 + STRATEGY.limit_buffer), 0));
  }
  const reason =
    intents.length === 0 ? "no signal" : intents.map((i) => `${i.side} ${i.qty} ${i.symbol}`).join(", ");
  return { intents, reason };
}

function intent(symbol: string, side: "buy" | "sell", qty: number, limit: number, move: number): PlanIntent {
  return {
    symbol,
    side,
    order_type: "limit",
    qty,
    limit_price: round(limit, 8),
    time_in_force: "IOC",
    strategy_id: STRATEGY.id,
    expected_edge_bps: round(Math.abs(move) * 10_000, 2),
  };
}

/**
 * The deterministic planner: reads the tick's conversation and answers with the next call of the
 * tick loop (PLAN → VALIDATE → DRY_RUN → EXECUTE → VERIFY → RECORD, with the seed's failure
 * branches), or the final answer once the decision is recorded. No LLM, no clock, no randomness.
 */
export function nextStep(request: ModelRequest): ModelResponse {
  const first = request.messages.find((m) => m.role === "user");
  if (!first) throw new AgentError("MODEL_BAD_RESPONSE", "the tick's prompt is missing");
  const task = decodeText(TickTask, first.content);
  const history = turns(request.messages);
  const n = history.length + 1;
  const say = (name: string, input: Record<string, unknown>, text = ""): ModelResponse => ({
    text,
    toolCalls: [{ id: `call_${n}`, name, input: { ...ids(task, `${name}-${n}`), ...input } }],
    stopReason: "toolUse",
    usage: { inputTokens: 0, outputTokens: 0 },
    costUsd: 0,
    model: STRATEGY.id,
  });
  const step = decide(task, history);
  if ("final" in step)
    return {
      text: JSON.stringify(step.final),
      toolCalls: [],
      stopReason: "endTurn",
      usage: { inputTokens: 0, outputTokens: 0 },
      costUsd: 0,
      model: STRATEGY.id,
    };
  return say(step.name, step.input, step.text);
}

const ids = (task: TickTask, key: string) => ({
  decision_id: task.decision_id,
  tick_id: task.tick_id,
  idempotency_key: `${task.decision_id}:${key}`,
});

type Step = { name: string; input: Record<string, unknown>; text?: string } | { final: TickOutcome };

function record(
  task: TickTask,
  outcome: TickOutcome["outcome"],
  summary: Record<string, string>,
  metrics: Record<string, unknown> = {},
): Step {
  return {
    name: "record_decision",
    input: {
      record: {
        plan_summary: summary.plan ?? "",
        validation_summary: summary.validation ?? "",
        execution_summary: summary.execution ?? "",
        verification_summary: summary.verification ?? "",
        state_delta: {},
        metrics: { outcome, ...metrics },
      },
    },
    text: `RECORD (${outcome})`,
  };
}

function decide(task: TickTask, history: Turn[]): Step {
  const previous = history.at(-1);
  if (!previous)
    return { name: "get_canonical_state", input: { as_of: task.as_of }, text: "PLAN: reading state" };
  const body = previous.result?.body ?? {};
  const errors = (body.errors as string[] | undefined) ?? [];
  if (previous.call.name === "record_decision") return finish(task, history, body);
  if (!previous.result?.ok)
    return record(task, "error", {
      plan: "error",
      execution: `${previous.call.name} failed: ${errors.join("; ") || (typeof body.error === "string" ? body.error : JSON.stringify(body))}`,
    });
  switch (previous.call.name) {
    case "get_canonical_state":
      return afterState(task, body);
    case "get_market_snapshot":
      return validateStep(task, history, 1);
    case "validate_plan":
      return afterValidation(task, previous, body);
    case "dry_run_plan":
      return afterDryRun(task, history, body);
    case "execute_plan":
      return afterExecution(body);
    case "verify_execution":
      return last(history, "execute_plan") ? afterVerification(task, body) : afterReconcile(task, body);
    case "set_kill_switch":
      return record(task, "safe_recovery", { verification: "safe recovery: kill switch on" });
    default:
      return record(task, "error", { execution: `unexpected tool ${previous.call.name}` });
  }
}

const snapshot = (task: TickTask): Step => ({
  name: "get_market_snapshot",
  input: { symbols: task.symbols, max_staleness_sec: 10 },
});

/** Safe recovery holds new entries: reconcile every uncertain order before planning anything. */
function afterState(task: TickTask, body: Record<string, unknown>): Step {
  const state = body.state as CanonicalState;
  if (state.runtime_flags.new_entries_halted)
    return { name: "verify_execution", input: { order_client_ids: [] }, text: "SAFE_RECOVERY: reconciling" };
  return snapshot(task);
}

function afterReconcile(task: TickTask, body: Record<string, unknown>): Step {
  const v = body.verification as { overall: string; drift_reasons: string[] };
  if (v.overall === "matched") return snapshot(task);
  return record(task, "safe_recovery", { verification: `still unreconciled: ${v.drift_reasons.join("; ")}` });
}

function validateStep(task: TickTask, history: Turn[], scale: number): Step {
  const state = (last(history, "get_canonical_state")?.result?.body.state ?? {}) as CanonicalState;
  const market = (last(history, "get_market_snapshot")?.result?.body.market ?? []) as Quote[];
  const plan = planFor(state, market, scale);
  if (plan.intents.length === 0) return record(task, "no_op", { plan: plan.reason });
  return { name: "validate_plan", input: { plan }, text: `PLAN: ${plan.reason}` };
}

function afterValidation(task: TickTask, previous: Turn, body: Record<string, unknown>): Step {
  const plan = previous.call.input as { plan: Plan };
  const validation = body.validation as { pass: boolean; blocking_reasons: string[] };
  if (!validation.pass)
    return record(task, "rejected", {
      plan: plan.plan.reason,
      validation: `rejected; remediation: ${validation.blocking_reasons.join("; ")}`,
    });
  const intents = plan.plan.intents.map(({ symbol, side, order_type, qty, limit_price }) => ({
    symbol,
    side,
    order_type,
    qty,
    limit_price,
  }));
  return {
    name: "dry_run_plan",
    input: { plan: { intents }, assumptions: STRATEGY.assumptions },
    text: "DRY_RUN",
  };
}

function afterDryRun(task: TickTask, history: Turn[], body: Record<string, unknown>): Step {
  const dry = body.dry_run as { pass: boolean; blocking_reasons: string[] };
  const validated = last(history, "validate_plan")?.call.input as { plan: Plan };
  if (!dry.pass) {
    const adjustments = history.filter((t) => t.call.name === "validate_plan").length - 1;
    if (adjustments < STRATEGY.max_adjustments) return validateStep(task, history, 0.5 ** (adjustments + 1));
    return record(task, "aborted", {
      plan: validated.plan.reason,
      validation: "passed",
      execution: `aborted after dry run: ${dry.blocking_reasons.join("; ")}`,
    });
  }
  const approved = validated.plan.intents.map((i, index) => {
    const intent_id = intentIdAt(index);
    return {
      intent_id,
      symbol: i.symbol,
      side: i.side,
      order_type: i.order_type,
      qty: i.qty,
      limit_price: i.limit_price,
      time_in_force: i.time_in_force,
      order_client_id: orderClientId(task.decision_id, { ...i, intent_id }),
    };
  });
  return {
    name: "execute_plan",
    input: { execution_mode: task.execution_mode, approved_intents: approved },
    text: "EXECUTE",
  };
}

function afterExecution(body: Record<string, unknown>): Step {
  const entries = (body.execution ?? []) as { order_client_id: string }[];
  return {
    name: "verify_execution",
    input: { order_client_ids: entries.map((e) => e.order_client_id) },
    text: "VERIFY",
  };
}

function afterVerification(task: TickTask, body: Record<string, unknown>): Step {
  const v = body.verification as { overall: string; drift_reasons: string[] };
  // A venue that fills more than was ordered is not to be traded with: the kill switch goes on.
  // Any other drift or uncertainty is safe recovery: the executor holds new entries until reconciled.
  if (v.overall === "drift" && v.drift_reasons.some((r) => r.includes(" > ordered ")))
    return {
      name: "set_kill_switch",
      input: { active: true, reason: `drift: ${v.drift_reasons.join("; ")}`, actor: "planner" },
      text: "SAFE_RECOVERY",
    };
  if (v.overall !== "matched")
    return record(task, "safe_recovery", { verification: `${v.overall}: ${v.drift_reasons.join("; ")}` });
  return record(task, "executed", { execution: "submitted", verification: "matched" });
}

function finish(task: TickTask, history: Turn[], body: Record<string, unknown>): Step {
  const input = last(history, "record_decision")?.call.input as {
    record: {
      metrics: { outcome: TickOutcome["outcome"] };
      execution_summary: string;
      validation_summary: string;
      plan_summary: string;
    };
  };
  const r = input.record;
  return {
    final: {
      decision_id: task.decision_id,
      tick_id: task.tick_id,
      outcome: r.metrics.outcome,
      ledger_ref: typeof body.ledger_ref === "string" && body.ledger_ref ? body.ledger_ref : "unrecorded",
      reason: [r.plan_summary, r.validation_summary, r.execution_summary].filter(Boolean).join(" | "),
    },
  };
}
