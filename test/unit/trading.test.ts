import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TradingConfig } from "../../services/trading-executor/config.js";
import {
  ExecutePlanRequest,
  FUNCTION_NAMES,
  Plan,
  type FunctionName,
  type PlanIntent,
  type RequestOf,
} from "../../services/trading-executor/contract.js";
import { handle } from "../../services/trading-executor/executor.js";
import { intentIdAt, orderClientId } from "../../services/trading-executor/ids.js";
import { MarketModel } from "../../services/trading-executor/market.js";
import { type ExecutorState, initialState } from "../../services/trading-executor/state.js";
import { riskScale, treasuryView } from "../../services/trading-executor/treasury.js";

/** Drives the pure executor core the way the tool service does, one call at a time. */
function desk(overrides: Record<string, unknown> = {}) {
  const config = TradingConfig.parse({ seed: "unit-1", ...overrides });
  const market = new MarketModel(config);
  let state: ExecutorState = initialState(config);
  let n = 0;
  const call = <F extends FunctionName>(
    fn: F,
    body: Record<string, unknown>,
    tick = "t-1",
    decision = "d-1",
  ) => {
    n += 1;
    const request = {
      decision_id: decision,
      tick_id: tick,
      idempotency_key: `k-${n}`,
      ...body,
    } as RequestOf<F>;
    const outcome = handle(state, fn, request, config, market);
    state = outcome.state;
    return outcome;
  };
  return { config, market, call, state: () => state };
}

const buy = (symbol: string, qty: number, limit: number): PlanIntent => ({
  symbol,
  side: "buy",
  order_type: "limit",
  qty,
  limit_price: limit,
  time_in_force: "IOC",
  strategy_id: "test",
  expected_edge_bps: 0,
});

/** A plan that passes every gate at tick 1 of seed unit-1: a small BTC buy above the ask. */
function smallBuy(d: ReturnType<typeof desk>): PlanIntent {
  const ask = d.market.quote("BTC-USD", 1).best_ask;
  return buy("BTC-USD", 0.02, Math.round(ask * 1.001 * 100) / 100);
}

const core = (i: PlanIntent) => ({
  symbol: i.symbol,
  side: i.side,
  order_type: i.order_type,
  qty: i.qty,
  limit_price: i.limit_price,
});
const approved = (decision: string, intents: PlanIntent[]) =>
  intents.map((i, index) => ({
    intent_id: intentIdAt(index),
    ...core(i),
    time_in_force: i.time_in_force,
    order_client_id: orderClientId(decision, { ...i, intent_id: intentIdAt(index) }),
  }));
const assumptions = { slippage_bps: 5, fee_bps: 10 };

/** validate → dry run → execute for one plan; returns each response. */
function fullTick(d: ReturnType<typeof desk>, intents: PlanIntent[], tick = "t-1", decision = "d-1") {
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

describe("the executor enforces the gates (the seed's 'must never' rules)", () => {
  it("a plan through every gate executes; each call leaves audit notes with the seed's fields", () => {
    const d = desk();
    const { validation, dry, exec, notes } = fullTick(d, [smallBuy(d)]);
    expect(validation).toMatchObject({ status: "ok", validation: { pass: true } });
    expect(dry).toMatchObject({ status: "ok", dry_run: { pass: true } });
    expect(exec).toMatchObject({ status: "ok", execution: [{ submit_status: "acked" }] });
    expect(d.state().ledger.positions["BTC-USD"]?.qty).toBe(0.02);
    expect(notes[0]?.data).toMatchObject({
      decision_id: "d-1",
      tick_id: "t-1",
      step: "EXECUTE",
      status: "passed",
    });
    expect(exec.audit_ref).toBe(notes.at(-1)?.data?.audit_id);
  });

  it("1. never trades while the kill switch is on, even for a plan validated and dry-run before it went on", () => {
    const d = desk();
    const intents = [smallBuy(d)];
    d.call("validate_plan", { plan: { intents, reason: "t" } });
    d.call("dry_run_plan", { plan: { intents: intents.map(core) }, assumptions });
    d.call("set_kill_switch", { active: true, reason: "operator", actor: "ops" });
    const exec = d.call("execute_plan", {
      execution_mode: "paper",
      approved_intents: approved("d-1", intents),
    });
    expect(exec.response.status).toBe("error");
    expect(String(exec.response.errors)).toMatch(/kill switch is active/);
    expect(d.state().orders).toEqual({});
  });

  it("2. never executes without a passing validation and dry run of this exact plan in this decision", () => {
    const d = desk();
    const intents = [smallBuy(d)];
    const skipped = d.call("execute_plan", {
      execution_mode: "paper",
      approved_intents: approved("d-1", intents),
    });
    expect(String(skipped.response.errors)).toMatch(/GATES_MISSING/);
    d.call("validate_plan", { plan: { intents, reason: "t" } });
    const noDryRun = d.call("execute_plan", {
      execution_mode: "paper",
      approved_intents: approved("d-1", intents),
    });
    expect(String(noDryRun.response.errors)).toMatch(/no passing dry run/);
    d.call("dry_run_plan", { plan: { intents: intents.map(core) }, assumptions });
    const bigger = [{ ...intents[0]!, qty: 0.05 }];
    const swapped = d.call("execute_plan", {
      execution_mode: "paper",
      approved_intents: approved("d-1", bigger),
    });
    expect(String(swapped.response.errors)).toMatch(/no passing validation/);
    const elsewhere = d.call(
      "execute_plan",
      { execution_mode: "paper", approved_intents: approved("d-2", intents) },
      "t-1",
      "d-2",
    );
    expect(String(elsewhere.response.errors)).toMatch(/GATES_MISSING/);
    expect(d.state().orders).toEqual({});
    const dryFirst = d.call("dry_run_plan", { plan: { intents: bigger.map(core) }, assumptions });
    expect(String(dryFirst.response.errors)).toMatch(/no passing validation/);
  });

  it("3. never exceeds notional, leverage, exposure, daily-loss or drawdown limits", () => {
    const d = desk();
    const ask = d.market.quote("BTC-USD", 1).best_ask;
    const huge = d.call("validate_plan", {
      plan: { intents: [buy("BTC-USD", 2, ask * 1.001)], reason: "t" },
    }).response;
    const checks = (huge.validation as { checks: { name: string; pass: boolean }[] }).checks;
    expect(checks.filter((c) => !c.pass).map((c) => c.name)).toEqual(
      expect.arrayContaining(["risk_limits", "exposure_leverage"]),
    );
    const tight = desk({
      risk_limits: {
        daily_loss_limit: 1,
        max_drawdown: 0.1,
        max_notional_per_trade: 10_000,
        max_portfolio_exposure: 0.6,
        max_leverage: 1,
      },
    });
    const loss = tight.call("validate_plan", { plan: { intents: [smallBuy(tight)], reason: "t" } }).response;
    expect(String((loss.validation as { blocking_reasons: string[] }).blocking_reasons)).toMatch(/daily P&L/);
    expect(() =>
      TradingConfig.parse({
        risk_limits: {
          daily_loss_limit: 1,
          max_drawdown: 0.1,
          max_notional_per_trade: 1,
          max_portfolio_exposure: 2,
          max_leverage: 2,
        },
      }),
    ).toThrow();
  });

  it("4. offers no withdrawal or transfer action, and refuses any field the contract does not name", () => {
    expect(FUNCTION_NAMES.filter((f) => /withdraw|transfer|deposit/.test(f))).toEqual([]);
    const plan = { intents: [buy("BTC-USD", 0.01, 60_000)], reason: "t" };
    expect(Plan.safeParse({ ...plan, transfer_to: "elsewhere" }).success).toBe(false);
    expect(Plan.safeParse({ ...plan, intents: [{ ...plan.intents[0], withdraw: true }] }).success).toBe(
      false,
    );
  });

  it("5. never submits without decision_id, tick_id and the deterministic order_client_id", () => {
    const d = desk();
    const intents = [smallBuy(d)];
    const request = {
      decision_id: "d-1",
      tick_id: "t-1",
      idempotency_key: "k",
      execution_mode: "paper",
      approved_intents: approved("d-1", intents),
    };
    expect(ExecutePlanRequest.safeParse({ ...request, decision_id: undefined }).success).toBe(false);
    expect(ExecutePlanRequest.safeParse({ ...request, tick_id: undefined }).success).toBe(false);
    d.call("validate_plan", { plan: { intents, reason: "t" } });
    d.call("dry_run_plan", { plan: { intents: intents.map(core) }, assumptions });
    const forged = approved("d-1", intents).map((i) => ({ ...i, order_client_id: "oc-mine" }));
    const exec = d.call("execute_plan", { execution_mode: "paper", approved_intents: forged });
    expect(String(exec.response.errors)).toMatch(/ORDER_ID_MISMATCH/);
    expect(d.state().orders).toEqual({});
  });

  it("6. opens no new position while an order's outcome is uncertain; reconciles it, then trades again", () => {
    const d = desk({ faults: { timeout_rate: 1, timeout_landed_rate: 0 } });
    const first = fullTick(d, [smallBuy(d)]);
    expect(first.exec).toMatchObject({
      status: "partial",
      execution: [{ submit_status: "timeout", exchange_order_id: null }],
    });
    const id = (first.exec.execution as { order_client_id: string }[])[0]!.order_client_id;
    const verify = d.call("verify_execution", { order_client_ids: [id] }).response;
    expect(verify).toMatchObject({
      verification: { overall: "uncertain", orders: [{ final_state: "unknown" }] },
    });
    expect(d.state().flags.new_entries_halted).toBe(true);
    const again = d.call(
      "validate_plan",
      { plan: { intents: [smallBuy(d)], reason: "t" } },
      "t-1",
      "d-1b",
    ).response;
    expect(String((again.validation as { blocking_reasons: string[] }).blocking_reasons)).toMatch(
      /uncertain state/,
    );
    // Re-submitting the same order id is refused until verification resolves it.
    const resubmit = d.call("execute_plan", {
      execution_mode: "paper",
      approved_intents: approved("d-1", [smallBuy(d)]),
    });
    expect(String(resubmit.response.errors)).toMatch(/uncertain/);
    // Next tick: the venue never had it; reconciliation resolves it and lifts the halt.
    const later = d.call("verify_execution", { order_client_ids: [] }, "t-2", "d-2").response;
    expect(later).toMatchObject({
      verification: { overall: "matched", orders: [{ order_client_id: id, final_state: "rejected" }] },
    });
    expect(d.state().flags.new_entries_halted).toBe(false);
    expect(d.state().ledger.positions).toEqual({});
  });

  it("7. cannot change risk limits from a plan, and cannot turn the kill switch off after a critical event", () => {
    const plan = { intents: [buy("BTC-USD", 0.01, 60_000)], reason: "t" };
    expect(Plan.safeParse({ ...plan, risk_limits: { max_leverage: 5 } }).success).toBe(false);
    const d = desk();
    d.call("set_kill_switch", { active: true, reason: "drift", actor: "planner" });
    const off = d.call("set_kill_switch", { active: false, reason: "all good", actor: "human" });
    expect(off.response).toMatchObject({ status: "error", kill_switch_active: true });
    expect(String(off.response.errors)).toMatch(/APPROVAL_REQUIRED/);
  });
});

describe("idempotency", () => {
  it("the same key and payload returns the same result and changes nothing; another payload is refused", () => {
    const d = desk();
    const intents = [smallBuy(d)];
    d.call("validate_plan", { plan: { intents, reason: "t" } });
    d.call("dry_run_plan", { plan: { intents: intents.map(core) }, assumptions });
    const request = {
      decision_id: "d-1",
      tick_id: "t-1",
      idempotency_key: "exec-1",
      execution_mode: "paper" as const,
      approved_intents: approved("d-1", intents),
    };
    const first = handle(d.state(), "execute_plan", request, d.config, d.market);
    const again = handle(first.state, "execute_plan", request, d.config, d.market);
    expect(again.response).toEqual(first.response);
    expect(again.state).toBe(first.state);
    const other = handle(
      first.state,
      "execute_plan",
      { ...request, approved_intents: approved("d-1", [{ ...intents[0]!, qty: 0.01 }]) },
      d.config,
      d.market,
    );
    expect(String(other.response.errors)).toMatch(/IDEMPOTENCY_KEY_REUSED/);
    // A new key for the same order id never places a second order.
    const newKey = handle(
      first.state,
      "execute_plan",
      { ...request, idempotency_key: "exec-2" },
      d.config,
      d.market,
    );
    expect(newKey.response).toMatchObject({ execution: [{ reject_code: "ALREADY_SUBMITTED" }] });
    expect(Object.keys(newKey.state.orders)).toHaveLength(1);
    expect(newKey.state.ledger.positions["BTC-USD"]?.qty).toBe(0.02);
  });

  it("order_client_id is a function of (decision, intent, symbol, side, qty, limit price)", () => {
    const base = { intent_id: "intent-1", symbol: "BTC-USD", side: "buy", qty: 1, limit_price: 10 };
    expect(orderClientId("d", base)).toBe(orderClientId("d", { ...base }));
    for (const change of [{ intent_id: "intent-2" }, { qty: 2 }, { limit_price: null }, { side: "sell" }])
      expect(orderClientId("d", { ...base, ...change })).not.toBe(orderClientId("d", base));
    expect(orderClientId("e", base)).not.toBe(orderClientId("d", base));
  });
});

describe("faults, self-financing and stop conditions", () => {
  it("a timed-out submit that did land is booked at reconciliation, not before", () => {
    const d = desk({ faults: { timeout_rate: 1, timeout_landed_rate: 1 } });
    const { exec } = fullTick(d, [smallBuy(d)]);
    expect(exec).toMatchObject({ execution: [{ submit_status: "timeout" }] });
    expect(d.state().ledger.positions).toEqual({});
    const id = (exec.execution as { order_client_id: string }[])[0]!.order_client_id;
    const v = d.call("verify_execution", { order_client_ids: [id] }).response;
    expect(v).toMatchObject({ verification: { overall: "matched", orders: [{ final_state: "filled" }] } });
    expect(d.state().ledger.positions["BTC-USD"]?.qty).toBe(0.02);
  });

  it("a fill far from the quote is drift: safe recovery halts new entries, raised as a critical note", () => {
    const d = desk({ faults: { drift_rate: 1 } });
    fullTick(d, [smallBuy(d)]);
    const ids = Object.keys(d.state().orders);
    const v = d.call("verify_execution", { order_client_ids: ids });
    expect(v.response).toMatchObject({ verification: { overall: "drift" } });
    expect(
      v.notes.some((n) => n.data?.severity === "critical" && /SAFE_RECOVERY/.test(String(n.reason))),
    ).toBe(true);
    expect(d.state().flags.new_entries_halted).toBe(true);
  });

  it("risk scaling follows the seed: normal, 0.75×, 0.25× without high-vol symbols, stop opening", () => {
    const config = TradingConfig.parse({});
    const d = desk();
    const mids = (s: string) => d.market.mid(s, 1);
    const view = treasuryView(d.state().ledger, config, mids);
    const at = (patch: Partial<typeof view>) => riskScale({ ...view, ...patch }, config);
    expect(at({ rolling_surplus_30d: 600, runway_days: 90 }).level).toBe("normal");
    expect(at({ rolling_surplus_30d: 100, runway_days: 90 })).toMatchObject({
      level: "reduced",
      factor: 0.75,
    });
    expect(at({ rolling_surplus_30d: -1, runway_days: 90 })).toMatchObject({
      level: "defensive",
      factor: 0.25,
      allowHighVol: false,
    });
    expect(at({ rolling_surplus_30d: 600, runway_days: 10 }).level).toBe("defensive");
    expect(at({ principal_protected: false }).level).toBe("stop_opening");
    expect(at({ pnl_today: -config.risk_limits.daily_loss_limit }).level).toBe("stop_opening");
  });

  it("a mandatory stop condition blocks trading and is raised once as a critical event", () => {
    const d = desk({
      treasury: {
        principal_baseline: 95_000,
        operating_cash: 100,
        target_surplus: 500,
        min_runway_days: 30,
        hard_min_runway_days: 7,
        reduced_factor: 0.75,
        defensive_factor: 0.25,
      },
    });
    const first = d.call("get_canonical_state", { as_of: "2026-11-22T00:00:00Z" });
    expect(first.notes.filter((n) => /STOP_TRADING: runway/.test(String(n.reason)))).toHaveLength(1);
    const second = d.call("validate_plan", { plan: { intents: [smallBuy(d)], reason: "t" } });
    expect(second.notes.filter((n) => /STOP_TRADING/.test(String(n.reason)))).toHaveLength(0);
    expect(String((second.response.validation as { blocking_reasons: string[] }).blocking_reasons)).toMatch(
      /stop-trading condition: runway/,
    );
  });

  it("replay: the same inputs give the same plan, validation and execution intents", () => {
    const run = () => {
      const d = desk({ faults: { partial_fill_rate: 0.5, reject_rate: 0.2 } });
      return fullTick(d, [
        smallBuy(d),
        buy("ETH-USD", 0.5, Math.round(d.market.quote("ETH-USD", 1).best_ask * 1.001 * 100) / 100),
      ]);
    };
    const a = run();
    const b = run();
    expect(b.validation).toEqual(a.validation);
    expect(b.dry).toEqual(a.dry);
    expect(b.exec).toEqual(a.exec);
  });
});

describe("the runtime stays domain-agnostic", () => {
  it("no trading term appears anywhere under shared/", () => {
    // The runtime's own kill switch (KILL_SWITCH_ACTIVE) is generic: only the domain's field names count.
    const words = /trading|\btrades?\b|portfolio|\bpnl\b|leverage/i;
    const fields = /order_client_id|decision_id|tick_id|exchange_order_id|kill_switch_active/;
    const domain = (text: string): boolean => words.test(text) || fields.test(text);
    const hits: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (domain(readFileSync(path, "utf8"))) hits.push(path);
      }
    };
    walk(new URL("../../shared", import.meta.url).pathname);
    expect(hits).toEqual([]);
  });
});
