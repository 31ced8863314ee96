import type { TradingConfig } from "./config.js";
import { type Ledger, type Mids, drawdown, equity } from "./ledger.js";
import { round } from "./market.js";

const EPSILON = 1e-9;

/** The seed's self-financing figures for the current state. */
export interface TreasuryView {
  daily_total_cost: number;
  rolling_surplus_30d: number;
  runway_days: number;
  principal_protected: boolean;
  pnl_today: number;
}

export type RiskLevel = "normal" | "reduced" | "defensive" | "stop_opening";

export interface RiskScale {
  level: RiskLevel;
  /** Multiplies every opening order's size. */
  factor: number;
  /** Defensive sizing also refuses new high-volatility symbols. */
  allowHighVol: boolean;
  reason: string;
}

const fixedCosts = (config: TradingConfig): number =>
  config.costs.infra_cost + config.costs.data_cost + config.costs.ops_overhead;

export function treasuryView(ledger: Ledger, config: TradingConfig, mids: Mids): TreasuryView {
  const closed = ledger.days;
  const avgFees =
    closed.length === 0 ? ledger.fees_today : closed.reduce((s, d) => s + d.fees, 0) / closed.length;
  const avgGain =
    closed.length === 0
      ? Math.max(0, ledger.realized_today)
      : closed.reduce((s, d) => s + Math.max(0, d.realized), 0) / closed.length;
  const daily = avgFees + fixedCosts(config) + config.costs.reserve_accrual_rate * avgGain;
  const surplus = closed.reduce((s, d) => s + d.realized - d.costs, 0);
  const eq = equity(ledger, mids);
  return {
    daily_total_cost: round(daily, 2),
    rolling_surplus_30d: round(surplus, 2),
    runway_days: round(ledger.operating_cash / Math.max(daily, EPSILON), 2),
    principal_protected: eq >= config.treasury.principal_baseline,
    pnl_today: round(eq - ledger.equity_day_start, 2),
  };
}

/** The seed's risk scaling rules, capital protection first. */
export function riskScale(view: TreasuryView, config: TradingConfig): RiskScale {
  const t = config.treasury;
  if (!view.principal_protected)
    return {
      level: "stop_opening",
      factor: 0,
      allowHighVol: false,
      reason: "equity below the principal baseline",
    };
  if (view.pnl_today <= -config.risk_limits.daily_loss_limit)
    return { level: "stop_opening", factor: 0, allowHighVol: false, reason: "daily loss limit reached" };
  if (view.rolling_surplus_30d < 0 || view.runway_days < t.min_runway_days)
    return {
      level: "defensive",
      factor: t.defensive_factor,
      allowHighVol: false,
      reason:
        view.rolling_surplus_30d < 0 ? "rolling 30-day surplus is negative" : "runway below the minimum",
    };
  if (view.rolling_surplus_30d < t.target_surplus)
    return { level: "reduced", factor: t.reduced_factor, allowHighVol: true, reason: "surplus below target" };
  return { level: "normal", factor: 1, allowHighVol: true, reason: "surplus at target, risk healthy" };
}

/** The seed's mandatory stop-trading conditions that hold now (each one a critical event). */
export function stopConditions(
  ledger: Ledger,
  config: TradingConfig,
  mids: Mids,
  flags: { kill_switch_active: boolean; unresolved_cycles: number },
): string[] {
  const view = treasuryView(ledger, config, mids);
  const stops: string[] = [];
  if (flags.kill_switch_active) stops.push("kill switch active");
  if (view.pnl_today <= -config.risk_limits.daily_loss_limit)
    stops.push(`daily loss limit reached (${view.pnl_today} ≤ -${config.risk_limits.daily_loss_limit})`);
  const dd = drawdown(ledger, mids);
  if (dd >= config.risk_limits.max_drawdown)
    stops.push(`drawdown breach (${round(dd * 100, 2)}% ≥ ${config.risk_limits.max_drawdown * 100}%)`);
  if (view.runway_days < config.treasury.hard_min_runway_days)
    stops.push(
      `runway below the hard minimum (${view.runway_days} < ${config.treasury.hard_min_runway_days} days)`,
    );
  if (flags.unresolved_cycles > config.max_reconcile_cycles)
    stops.push(`uncertain order state unresolved after ${flags.unresolved_cycles} verification cycles`);
  return stops;
}

/**
 * Closes the day: operating costs are paid from the operating cash, the reserve share of realized
 * gains is kept in trading capital and the rest tops up the operating cash; the daily P&L resets.
 */
export function closeDay(ledger: Ledger, config: TradingConfig, mids: Mids): Ledger {
  const gain = Math.max(0, ledger.realized_today);
  const reserve = config.costs.reserve_accrual_rate * gain;
  const topUp = gain - reserve;
  const costs = ledger.fees_today + fixedCosts(config) + reserve;
  const day = {
    day: ledger.day,
    realized: round(ledger.realized_today, 6),
    costs: round(costs, 6),
    fees: ledger.fees_today,
  };
  const next: Ledger = {
    ...ledger,
    cash: round(ledger.cash - topUp, 6),
    operating_cash: round(ledger.operating_cash + topUp - fixedCosts(config), 6),
    realized_today: 0,
    fees_today: 0,
    day: ledger.day + 1,
    days: [...ledger.days, day].slice(-30),
  };
  return { ...next, equity_day_start: round(equity(next, mids), 6) };
}
