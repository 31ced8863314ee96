import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TradingConfig } from "../../examples/trading/executor/config.js";
import { handle } from "../../examples/trading/executor/executor.js";
import { orderClientId } from "../../examples/trading/executor/ids.js";
import { riskScale, stopConditions, treasuryView } from "../../examples/trading/executor/treasury.js";
import { openLedger } from "../../examples/trading/executor/ledger.js";
import {
  LOW_RUNWAY,
  approved,
  assumptions,
  buy,
  core,
  desk,
  fullTick,
  smallBuy,
} from "../helpers/trading.js";

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

  it("each of the seed's five mandatory stop conditions holds exactly when its trigger does", () => {
    const config = TradingConfig.parse({});
    const mids = () => 0;
    const calm = { kill_switch_active: false, unresolved_cycles: 0 };
    const fresh = openLedger(100_000, 3_000);
    expect(stopConditions(fresh, config, mids, calm)).toEqual([]);
    const cases: [string, Parameters<typeof stopConditions>[0], typeof calm, RegExp][] = [
      ["kill switch", fresh, { ...calm, kill_switch_active: true }, /^kill switch active$/],
      ["daily loss", { ...fresh, cash: 97_900, equity_peak: 97_900 }, calm, /^daily loss limit reached/],
      ["drawdown", { ...fresh, cash: 89_000, equity_day_start: 89_000 }, calm, /^drawdown breach/],
      ["runway", { ...fresh, operating_cash: 100 }, calm, /^runway below the hard minimum/],
      [
        "uncertain order",
        fresh,
        { ...calm, unresolved_cycles: 3 },
        /^uncertain order state unresolved after 3/,
      ],
    ];
    for (const [name, ledger, flags, expected] of cases) {
      const stops = stopConditions(ledger, config, mids, flags);
      expect(stops, name).toHaveLength(1);
      expect(stops[0], name).toMatch(expected);
    }
  });

  it("a mandatory stop condition blocks trading and is raised once as a critical event", () => {
    const d = desk(LOW_RUNWAY);
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

  it("the RECORD event carries the seed's replay record: input hashes, judged plans, orders, outputs, timestamps", () => {
    const record = (seed: string) => {
      const d = desk({ seed });
      d.call("get_canonical_state", { as_of: "2026-11-23T00:00:00Z" });
      d.call("get_market_snapshot", { symbols: ["BTC-USD"], max_staleness_sec: 10 });
      const tick = fullTick(d, [smallBuy(d)]);
      const body = {
        plan_summary: "p",
        validation_summary: "v",
        execution_summary: "e",
        verification_summary: "x",
      };
      const note = d.call("record_decision", { record: { ...body, state_delta: { n: 1 }, metrics: {} } })
        .notes[0];
      return { replay: note?.data?.replay_record as Record<string, Record<string, unknown>>, tick };
    };
    const a = record("unit-1");
    expect(a.replay.inputs).toEqual({
      state_hash: expect.stringMatching(/^[0-9a-f]{16,}$/) as unknown,
      market_hash: expect.stringMatching(/^[0-9a-f]{16,}$/) as unknown,
      config_hash: expect.stringMatching(/^[0-9a-f]{16,}$/) as unknown,
    });
    expect(a.replay.validation?.passed).toHaveLength(1);
    expect(a.replay.execution?.order_client_ids).toEqual(
      (a.tick.exec.execution as { order_client_id: string }[]).map((e) => e.order_client_id),
    );
    expect(a.replay.timestamps).toEqual({ planned_at: "2026-11-23T00:00:00Z", executed_at: null });
    // Same inputs, same record; another seed is another market and another record.
    expect(record("unit-1").replay).toEqual(a.replay);
    expect(record("unit-2").replay.inputs).not.toEqual(a.replay.inputs);
  });
});

describe("the runtime stays domain-agnostic", () => {
  it("no trading term appears anywhere under shared/ or services/", () => {
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
    walk(new URL("../../services", import.meta.url).pathname);
    expect(hits).toEqual([]);
  });
});

describe("resting orders", () => {
  it("a GTC limit below the ask rests with its cash locked, then fills on a later tick the market crosses", () => {
    const d = desk();
    const q = d.market.quote("BTC-USD", 1);
    const limit = Math.round(q.best_bid * 0.998 * 100) / 100;
    const intent = { ...buy("BTC-USD", 0.02, limit), time_in_force: "GTC" as const };
    const { exec } = fullTick(d, [intent]);
    expect(exec).toMatchObject({ status: "ok", execution: [{ submit_status: "acked" }] });
    const id = (exec.execution as { order_client_id: string }[])[0]?.order_client_id ?? "";
    expect(d.state().orders[id]?.state).toBe("new");
    expect(d.state().ledger.locked).toBeGreaterThan(0);
    let tick = 1;
    while (d.state().orders[id]?.state === "new" && tick < 60) {
      tick += 1;
      d.call("get_canonical_state", { as_of: "2026-11-23T00:00:00Z" }, `t-${tick}`, `d-${tick}`);
    }
    expect(d.state().orders[id]?.state).toBe("filled");
    expect(d.market.quote("BTC-USD", tick).best_ask).toBeLessThanOrEqual(limit);
    expect(d.state().ledger.positions["BTC-USD"]?.qty).toBe(0.02);
    expect(d.state().ledger.locked).toBe(0);
  });
});
