import { TradingConfig } from "../../examples/trading/executor/config.js";
import type { PlanIntent } from "../../examples/trading/executor/contract.js";
import type { ExecutorFunction, ExecutorRequest } from "../../examples/trading/executor/control-contract.js";
import type { ToolApproval } from "../../shared/contracts/tool.js";
import { handle } from "../../examples/trading/executor/executor.js";
import { intentIdAt, orderClientId } from "../../examples/trading/executor/ids.js";
import { MarketModel } from "../../examples/trading/executor/market.js";
import { type ExecutorState, initialState } from "../../examples/trading/executor/state.js";

/** Drives the pure executor core the way the tool service does, one call at a time. */
export function desk(overrides: Record<string, unknown> = {}) {
  const config = TradingConfig.parse({ seed: "unit-1", ...overrides });
  const market = new MarketModel(config);
  let state: ExecutorState = initialState(config);
  let n = 0;
  const call = <F extends ExecutorFunction>(
    fn: F,
    body: Record<string, unknown>,
    tick = "t-1",
    decision = "d-1",
    approval?: ToolApproval,
  ) => {
    n += 1;
    const request = {
      decision_id: decision,
      tick_id: tick,
      idempotency_key: `k-${n}`,
      ...body,
    } as ExecutorRequest<F>;
    const outcome = handle(state, fn, request, config, market, approval ? { approval } : {});
    state = outcome.state;
    return outcome;
  };
  return { config, market, call, state: () => state };
}

export const buy = (symbol: string, qty: number, limit: number): PlanIntent => ({
  symbol,
  side: "buy",
  order_type: "limit",
  qty,
  limit_price: limit,
  time_in_force: "IOC",
  strategy_id: "rebalance-v1",
  expected_edge_bps: 0,
});

/** A plan that passes every gate at tick 1 of seed unit-1: a small BTC buy above the ask. */
export function smallBuy(d: ReturnType<typeof desk>): PlanIntent {
  const ask = d.market.quote("BTC-USD", 1).best_ask;
  return buy("BTC-USD", 0.02, Math.round(ask * 1.001 * 100) / 100);
}

export const core = (i: PlanIntent) => ({
  symbol: i.symbol,
  side: i.side,
  order_type: i.order_type,
  qty: i.qty,
  limit_price: i.limit_price,
});
export const approved = (decision: string, intents: PlanIntent[]) =>
  intents.map((i, index) => ({
    intent_id: intentIdAt(index),
    ...core(i),
    time_in_force: i.time_in_force,
    order_client_id: orderClientId(decision, { ...i, intent_id: intentIdAt(index) }),
  }));
export const assumptions = { slippage_bps: 5, fee_bps: 10 };

/** validate → dry run → execute for one plan; returns each response. */
export function fullTick(d: ReturnType<typeof desk>, intents: PlanIntent[], tick = "t-1", decision = "d-1") {
  const validation = d.call("validate_plan", { plan: { intents, reason: "test" } }, tick, decision).response;
  const dry = d.call(
    "dry_run_plan",
    { plan: { intents: intents.map(core) }, assumptions },
    tick,
    decision,
  ).response;
  const exec = d.call(
    "execute_plan",
    { execution_mode: "paper", approved_intents: approved(decision, intents) },
    tick,
    decision,
  );
  return { validation, dry, exec: exec.response, notes: exec.notes };
}

/** Operating cash for barely two days of costs: the runway stop condition holds from the start. */
export const LOW_RUNWAY = {
  treasury: {
    principal_baseline: 95_000,
    operating_cash: 100,
    target_surplus: 500,
    min_runway_days: 30,
    hard_min_runway_days: 7,
    reduced_factor: 0.75,
    defensive_factor: 0.25,
  },
};
