import { describe, expect, it } from "vitest";
import { ApplyControlChangeRequest } from "../../examples/trading/executor/control-contract.js";
import type { ToolApproval } from "../../shared/contracts/tool.js";
import { LOW_RUNWAY, buy, desk, smallBuy } from "../helpers/trading.js";

const asOf = { as_of: "2026-11-23T00:00:00Z" };
type Desk = ReturnType<typeof desk>;

const approvalFor = (token: string, by = "alice"): ToolApproval => ({ token, by, decidedAt: 42 });

/** Asks for a change, checks it is held for a human with nothing changed, then approves it. */
function approve(d: Desk, fn: "set_kill_switch" | "apply_control_change", body: Record<string, unknown>) {
  const before = d.state();
  const asked = d.call(fn, body, "ops-1", "ctl-1");
  expect(asked.approval?.token).toMatch(/^appr-/);
  expect(String(asked.response.errors)).toMatch(/APPROVAL_REQUIRED/);
  expect(d.state()).toBe(before);
  const token = asked.approval?.token ?? "";
  const done = d.call(fn, body, "ops-1", "ctl-1", approvalFor(token));
  return { asked, done, token };
}

const change = (c: Record<string, unknown>) => ({ change: c, reason: "desk review", requested_by: "ops" });
const blocking = (r: Record<string, unknown>) =>
  String((r.validation as { blocking_reasons: string[] }).blocking_reasons);

describe("the six actions that need a human's approval", () => {
  it("kill switch off after a critical event: held, then done once with the approver recorded", () => {
    const d = desk();
    d.call("set_kill_switch", { active: true, reason: "drift", actor: "planner" });
    const body = { active: false, reason: "venue checked", actor: "ops" };
    const forged = d.call("set_kill_switch", body, "ops-1", "ctl-1", approvalFor("appr-made-up"));
    expect(String(forged.response.errors)).toMatch(/APPROVAL_INVALID/);
    expect(d.state().flags.kill_switch_active).toBe(true);
    const { done, token } = approve(d, "set_kill_switch", body);
    expect(done.response).toMatchObject({ status: "ok", kill_switch_active: false });
    expect(d.state().approvals).toEqual([
      { token, by: "alice", decided_at: 42, action: "kill_switch_off", decision_id: "ctl-1", tick: 0 },
    ]);
    expect(done.notes.at(0)?.data).toMatchObject({ step: "CONTROL", actor: "human", approved_by: "alice" });
    // The same critical event again: the old approval is spent.
    d.call("set_kill_switch", { active: true, reason: "drift", actor: "planner" });
    const reused = d.call("set_kill_switch", body, "ops-1", "ctl-1", approvalFor(token));
    expect(String(reused.response.errors)).toMatch(/APPROVAL_USED/);
    expect(d.state().flags.kill_switch_active).toBe(true);
  });

  it("an approval is for exactly one request: another change with it is refused", () => {
    const d = desk();
    const asked = d.call(
      "apply_control_change",
      change({ kind: "risk_limits", limits: { max_leverage: 0.5 } }),
    );
    const other = d.call(
      "apply_control_change",
      change({ kind: "risk_limits", limits: { max_leverage: 1 } }),
      "t-1",
      "d-1",
      approvalFor(asked.approval?.token ?? ""),
    );
    expect(String(other.response.errors)).toMatch(/APPROVAL_INVALID/);
    expect(d.state().overrides).toEqual({});
  });

  it("hard risk limits change only when approved, and never outside the policy range (leverage ≤ 1)", () => {
    const d = desk();
    const { done } = approve(
      d,
      "apply_control_change",
      change({ kind: "risk_limits", limits: { max_notional_per_trade: 500 } }),
    );
    expect(done.response).toMatchObject({ applied: true, approved_by: "alice" });
    const view = d.call("get_canonical_state", asOf).response.state as {
      risk_limits: Record<string, number>;
    };
    expect(view.risk_limits.max_notional_per_trade).toBe(500);
    expect(
      blocking(d.call("validate_plan", { plan: { intents: [smallBuy(d)], reason: "t" } }).response),
    ).toMatch(/notional/);
    const tooMuch = change({ kind: "risk_limits", limits: { max_leverage: 3 } });
    expect(
      ApplyControlChangeRequest.safeParse({
        decision_id: "c",
        tick_id: "c",
        idempotency_key: "c",
        ...tooMuch,
      }).success,
    ).toBe(false);
  });

  it("live mode either way is approved; this build then places no live order", () => {
    const d = desk();
    approve(d, "apply_control_change", change({ kind: "mode", mode: "live" }));
    const view = d.call("get_canonical_state", asOf).response.state as { runtime_flags: { mode: string } };
    expect(view.runtime_flags.mode).toBe("live");
    expect(
      blocking(d.call("validate_plan", { plan: { intents: [smallBuy(d)], reason: "t" } }).response),
    ).toMatch(/paper venue only/);
  });

  it("treasury transfers above the threshold need a human; small ones do not; neither counts as P&L", () => {
    const d = desk();
    const small = d.call(
      "apply_control_change",
      change({ kind: "treasury_transfer", direction: "to_operating", amount: 500 }),
    );
    expect(small.approval).toBeUndefined();
    expect(small.response).toMatchObject({ applied: true, approved_by: null });
    const { done } = approve(
      d,
      "apply_control_change",
      change({ kind: "treasury_transfer", direction: "to_operating", amount: 2_000 }),
    );
    expect(done.response).toMatchObject({ applied: true, approved_by: "alice" });
    expect(d.state().ledger.operating_cash).toBe(3_000 + 2_500);
    const view = d.call("get_canonical_state", asOf).response.state as { pnl: { pnl_today: number } };
    expect(view.pnl.pnl_today).toBe(0);
    const tooBig = approve(
      d,
      "apply_control_change",
      change({ kind: "treasury_transfer", direction: "to_trading", amount: 900_000 }),
    );
    expect(String(tooBig.done.response.errors)).toMatch(/INSUFFICIENT_FUNDS/);
    expect(d.state().ledger.operating_cash).toBe(5_500);
  });

  it("strategy family and symbol universe changes are approved, then enforced by the policy gate", () => {
    const d = desk();
    approve(d, "apply_control_change", change({ kind: "strategy", universe: ["ETH-USD"] }));
    expect(
      blocking(d.call("validate_plan", { plan: { intents: [smallBuy(d)], reason: "t" } }).response),
    ).toMatch(/outside the symbol universe/);
    const other = { ...buy("ETH-USD", 0.1, 3_000), strategy_id: "momentum-x" };
    expect(
      blocking(d.call("validate_plan", { plan: { intents: [other], reason: "t" } }, "t-1", "d-2").response),
    ).toMatch(/strategy 'momentum-x' is not allowed/);
    const unknown = approve(d, "apply_control_change", change({ kind: "strategy", universe: ["NOPE-USD"] }));
    expect(String(unknown.done.response.errors)).toMatch(/UNKNOWN_SYMBOL/);
  });

  it("suppressing a critical alert is approved; the stop condition still blocks trading", () => {
    const plain = desk(LOW_RUNWAY);
    expect(
      plain
        .call("get_canonical_state", asOf)
        .notes.some((n) => /STOP_TRADING: runway/.test(String(n.reason))),
    ).toBe(true);
    const d = desk(LOW_RUNWAY);
    const { done } = approve(
      d,
      "apply_control_change",
      change({ kind: "alert_override", alert: "runway below the hard minimum", suppress: true }),
    );
    expect(done.notes.some((n) => /STOP_TRADING/.test(String(n.reason)))).toBe(false);
    expect(d.call("get_canonical_state", asOf).notes.some((n) => /STOP_TRADING/.test(String(n.reason)))).toBe(
      false,
    );
    expect(
      blocking(d.call("validate_plan", { plan: { intents: [smallBuy(d)], reason: "t" } }).response),
    ).toMatch(/stop-trading condition: runway/);
  });
});

describe("each market-sanity check on its own", () => {
  const cases: [string, Record<string, unknown>, (d: Desk) => ReturnType<typeof buy>, RegExp][] = [
    ["halted", { faults: { halt_rate: 1 } }, smallBuy, /is halted/],
    ["stale", { faults: { stale_rate: 1 } }, smallBuy, /s stale/],
    ["spread", { market: { max_spread_bps: 1, max_vol_1m: 0.05 } }, smallBuy, /spread .* bps > 1/],
    [
      "volatility",
      { market: { max_spread_bps: 50, max_vol_1m: 0.000001 } },
      smallBuy,
      /volatility .* > 0.000001/,
    ],
    [
      "limit deviation",
      {},
      (d) => ({ ...smallBuy(d), limit_price: d.market.mid("BTC-USD", 1) * 1.2 }),
      /more than 5% from mid/,
    ],
  ];
  for (const [name, config, plan, expected] of cases) {
    it(`${name}: market_sanity fails and names it; the plan cannot execute`, () => {
      const d = desk(config);
      const v = d.call("validate_plan", { plan: { intents: [plan(d)], reason: "t" } }).response;
      const checks = (v.validation as { checks: { name: string; pass: boolean; detail: string }[] }).checks;
      const sanity = checks.find((c) => c.name === "market_sanity");
      expect(sanity?.pass).toBe(false);
      expect(sanity?.detail).toMatch(expected);
      expect(Object.values(d.state().decisions["d-1"]?.validated ?? {})).toEqual([false]);
    });
  }
});
