import { describe, expect, it } from "vitest";
import { TradingConfig } from "../../examples/trading/executor/config.js";
import { ExecutePlanRequest, FUNCTION_NAMES, Plan } from "../../examples/trading/executor/contract.js";
import { approved, assumptions, buy, core, desk, fullTick, smallBuy } from "../helpers/trading.js";

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
