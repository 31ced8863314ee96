import type { TradingConfig, TradingPolicy } from "./config.js";
import type { DryRun, DryRunIntent, GateCheck, PlanIntent, Quote, Validation } from "./contract.js";
import { type Ledger, drawdown, equity } from "./ledger.js";
import { round } from "./market.js";
import type { RiskScale, TreasuryView } from "./treasury.js";

/** Quotes older than this are not traded on, whatever the planner asked the snapshot for. */
export const MAX_STALENESS_SEC = 10;
/** A limit price this far from the mid is abnormal (a fat finger, not a strategy). */
export const MAX_LIMIT_DEVIATION = 0.05;

/** What every gate reads: the book, the market at this tick, the flags and the treasury. */
export interface GateContext {
  config: TradingConfig;
  ledger: Ledger;
  quote: (symbol: string) => Quote | undefined;
  mid: (symbol: string) => number;
  isHighVol: (symbol: string) => boolean;
  flags: { trading_enabled: boolean; kill_switch_active: boolean; new_entries_halted: boolean };
  /** Orders whose outcome is still unknown. */
  unresolved: number;
  treasury: TreasuryView;
  scale: RiskScale;
  /** Mandatory stop-trading conditions that hold now (the kill switch is in `flags`). */
  stops: string[];
}

const refPrice = (i: DryRunIntent, q: Quote): number =>
  i.limit_price ?? (i.side === "buy" ? q.best_ask : q.best_bid);

/** Positions and cash after the intents fill at their reference prices. */
function project(intents: readonly DryRunIntent[], ctx: GateContext, feeBps: number, slipBps = 0) {
  const qty = new Map(Object.entries(ctx.ledger.positions).map(([s, p]) => [s, p.qty]));
  let cash = ctx.ledger.cash - ctx.ledger.locked;
  let fees = 0;
  for (const i of intents) {
    const q = ctx.quote(i.symbol);
    if (!q) continue;
    const signed = i.side === "buy" ? 1 : -1;
    const price = refPrice(i, q) * (1 + (signed * slipBps) / 10_000);
    const fee = (i.qty * price * feeBps) / 10_000;
    fees += fee;
    cash -= signed * i.qty * price + fee;
    qty.set(i.symbol, (qty.get(i.symbol) ?? 0) + signed * i.qty);
  }
  const values = [...qty.entries()].map(([s, n]) => ({ symbol: s, value: n * ctx.mid(s), qty: n }));
  const gross = values.reduce((sum, v) => sum + Math.abs(v.value), 0);
  const eq = cash + values.reduce((sum, v) => sum + v.value, 0);
  return { cash, fees, eq, gross, values };
}

function riskLimits(intents: readonly PlanIntent[], ctx: GateContext): GateCheck {
  const limits = ctx.config.risk_limits;
  const problems: string[] = [];
  for (const i of intents) {
    const q = ctx.quote(i.symbol);
    if (!q) continue;
    const notional = i.qty * refPrice(i, q);
    if (notional > limits.max_notional_per_trade)
      problems.push(
        `${i.symbol} notional ${round(notional, 2)} > max_notional_per_trade ${limits.max_notional_per_trade}`,
      );
    const held = ctx.ledger.positions[i.symbol]?.qty ?? 0;
    if (i.side === "sell" && i.qty > held + 1e-9)
      problems.push(`${i.symbol} sell ${i.qty} exceeds the position ${held} (no short selling)`);
  }
  const p = project(intents, ctx, ctx.config.fee_bps);
  if (ctx.treasury.pnl_today - p.fees <= -limits.daily_loss_limit)
    problems.push(
      `projected daily P&L ${round(ctx.treasury.pnl_today - p.fees, 2)} breaches -${limits.daily_loss_limit}`,
    );
  const dd = drawdown(ctx.ledger, ctx.mid) + p.fees / Math.max(ctx.ledger.equity_peak, 1);
  if (dd >= limits.max_drawdown)
    problems.push(`projected drawdown ${round(dd * 100, 2)}% ≥ ${limits.max_drawdown * 100}%`);
  return check("risk_limits", problems, "within daily loss, drawdown and per-trade notional limits");
}

function runwayBudget(intents: readonly PlanIntent[], ctx: GateContext): GateCheck {
  const { treasury: view, scale, config } = ctx;
  const problems: string[] = [];
  if (view.runway_days < config.treasury.hard_min_runway_days)
    problems.push(`runway ${view.runway_days} days < hard minimum ${config.treasury.hard_min_runway_days}`);
  for (const i of intents.filter((x) => x.side === "buy")) {
    const q = ctx.quote(i.symbol);
    if (!q) continue;
    if (scale.level === "stop_opening") problems.push(`no new positions: ${scale.reason}`);
    const cap = config.risk_limits.max_notional_per_trade * scale.factor;
    if (scale.level !== "stop_opening" && i.qty * refPrice(i, q) > cap + 1e-9)
      problems.push(`${i.symbol} buy exceeds ${scale.level} sizing (${round(cap, 2)} at ×${scale.factor})`);
    if (!scale.allowHighVol && ctx.isHighVol(i.symbol))
      problems.push(`${i.symbol} is high-volatility, refused under ${scale.level} sizing`);
  }
  return check(
    "runway_budget",
    problems,
    `runway ${view.runway_days} days, sizing ${scale.level} ×${scale.factor}`,
  );
}

function exposureLeverage(intents: readonly PlanIntent[], ctx: GateContext): GateCheck {
  const limits = ctx.config.risk_limits;
  const p = project(intents, ctx, ctx.config.fee_bps);
  const problems: string[] = [];
  if (p.cash < 0) problems.push(`needs ${round(-p.cash, 2)} more cash than free (no borrowing)`);
  const leverage = p.eq <= 0 ? Number.POSITIVE_INFINITY : p.gross / p.eq;
  if (leverage > limits.max_leverage + 1e-9)
    problems.push(`leverage ${round(leverage, 4)} > ${limits.max_leverage}`);
  if (leverage > limits.max_portfolio_exposure + 1e-9)
    problems.push(`portfolio exposure ${round(leverage, 4)} > ${limits.max_portfolio_exposure}`);
  return check("exposure_leverage", problems, `post-trade exposure ${round(leverage, 4)} of equity`);
}

function marketSanity(intents: readonly PlanIntent[], ctx: GateContext): GateCheck {
  const guard = ctx.config.market;
  const problems: string[] = [];
  for (const i of intents) {
    const q = ctx.quote(i.symbol);
    if (!q) {
      problems.push(`${i.symbol} is not listed`);
      continue;
    }
    if (q.halted) problems.push(`${i.symbol} is halted`);
    if (q.staleness_sec > MAX_STALENESS_SEC) problems.push(`${i.symbol} quote is ${q.staleness_sec}s stale`);
    if (q.spread_bps > guard.max_spread_bps)
      problems.push(`${i.symbol} spread ${q.spread_bps} bps > ${guard.max_spread_bps}`);
    if (q.vol_1m > guard.max_vol_1m)
      problems.push(`${i.symbol} volatility ${q.vol_1m} > ${guard.max_vol_1m}`);
    if (i.limit_price !== null && Math.abs(i.limit_price / q.mid - 1) > MAX_LIMIT_DEVIATION)
      problems.push(
        `${i.symbol} limit ${i.limit_price} is more than ${MAX_LIMIT_DEVIATION * 100}% from mid ${q.mid}`,
      );
  }
  return check("market_sanity", problems, "quotes fresh, spreads and volatility inside guardrails, no halt");
}

function policyGuardrails(intents: readonly PlanIntent[], ctx: GateContext): GateCheck {
  const problems: string[] = [];
  if (!ctx.flags.trading_enabled) problems.push("trading is disabled");
  if (ctx.flags.kill_switch_active) problems.push("kill switch is active");
  for (const stop of ctx.stops) problems.push(`stop-trading condition: ${stop}`);
  if (ctx.config.mode === "live")
    problems.push("live mode: this build ships the paper venue only, so no live order is placed");
  problems.push(...outsidePolicy(intents, ctx.config.policy));
  const opens = intents.some((i) => i.side === "buy");
  if (opens && ctx.unresolved > 0)
    problems.push(`${ctx.unresolved} order(s) in uncertain state: no new positions`);
  if (opens && ctx.flags.new_entries_halted) problems.push("new entries are halted (safe recovery)");
  return check("policy_guardrails", problems, `mode ${ctx.config.mode}, trading enabled, kill switch off`);
}

/** The strategy id the executor gives intents it re-checks at execution (validation checked the real one). */
export const RECHECK_STRATEGY = "execute";

/** Intents of a strategy not allowed, or in a symbol outside the universe. */
function outsidePolicy(intents: readonly PlanIntent[], policy: TradingPolicy): string[] {
  const problems: string[] = [];
  for (const i of intents) {
    if (i.strategy_id !== RECHECK_STRATEGY && !policy.allowed_strategies.includes(i.strategy_id))
      problems.push(`strategy '${i.strategy_id}' is not allowed (${policy.allowed_strategies.join(", ")})`);
    if (policy.universe && !policy.universe.includes(i.symbol))
      problems.push(`${i.symbol} is outside the symbol universe`);
  }
  return problems;
}

function check(name: GateCheck["name"], problems: string[], ok: string): GateCheck {
  return { name, pass: problems.length === 0, detail: problems.length === 0 ? ok : problems.join("; ") };
}

/** The five mandatory gates; the plan passes only when every one does. */
export function validate(intents: readonly PlanIntent[], ctx: GateContext): Validation {
  const checks = [
    riskLimits(intents, ctx),
    runwayBudget(intents, ctx),
    exposureLeverage(intents, ctx),
    marketSanity(intents, ctx),
    policyGuardrails(intents, ctx),
  ];
  const blocking = checks.filter((c) => !c.pass).map((c) => `${c.name}: ${c.detail}`);
  return { pass: blocking.length === 0, checks, blocking_reasons: blocking };
}

/** Simulates sizing, fees and slippage, post-trade limits and order-id collisions. */
export function dryRun(
  intents: readonly DryRunIntent[],
  assumptions: { slippage_bps: number; fee_bps: number },
  ctx: GateContext,
  conflicts: string[],
): DryRun {
  const feeBps = Math.max(assumptions.fee_bps, ctx.config.fee_bps);
  const blocking: string[] = [];
  const projected: DryRun["projected"] = [];
  for (let n = 1; n <= intents.length; n++) {
    const i = intents[n - 1] as DryRunIntent;
    const q = ctx.quote(i.symbol);
    if (!q) {
      blocking.push(`${i.symbol} is not listed`);
      continue;
    }
    const signed = i.side === "buy" ? 1 : -1;
    const price = refPrice(i, q) * (1 + (signed * assumptions.slippage_bps) / 10_000);
    const fee = (i.qty * price * feeBps) / 10_000;
    const after = project(intents.slice(0, n), ctx, feeBps, assumptions.slippage_bps);
    projected.push({
      symbol: i.symbol,
      est_fill_price: round(price),
      est_fee: round(fee, 6),
      est_pnl_impact: round(-fee - i.qty * Math.abs(price - q.mid), 6),
      post_trade_exposure: round(after.eq <= 0 ? Number.POSITIVE_INFINITY : after.gross / after.eq, 6),
    });
  }
  const end = project(intents, ctx, feeBps, assumptions.slippage_bps);
  const limits = ctx.config.risk_limits;
  if (end.cash < 0) blocking.push(`after fees and slippage the plan needs ${round(-end.cash, 2)} more cash`);
  const leverage = end.eq <= 0 ? Number.POSITIVE_INFINITY : end.gross / end.eq;
  if (leverage > Math.min(limits.max_leverage, limits.max_portfolio_exposure) + 1e-9)
    blocking.push(`post-trade exposure ${round(leverage, 4)} breaches the limits after slippage`);
  // What the plan costs (fees, slippage) on top of what today has already lost.
  const projectedLoss = equity(ctx.ledger, ctx.mid) - end.eq - ctx.treasury.pnl_today;
  if (projectedLoss >= limits.daily_loss_limit)
    blocking.push("the projected cost breaches the daily loss limit");
  if (conflicts.length > 0) blocking.push(`order ids already used: ${conflicts.join(", ")}`);
  return {
    pass: blocking.length === 0,
    projected,
    idempotency_conflicts: conflicts,
    blocking_reasons: blocking,
  };
}
