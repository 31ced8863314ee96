import type { Side } from "./contract.js";
import { round } from "./market.js";

export interface Position {
  qty: number;
  avg_price: number;
}

/** One closed day of the self-financing record. */
export interface DayRecord {
  day: number;
  realized: number;
  costs: number;
  fees: number;
}

/** Our book: cash, positions, P&L and the treasury's operating cash. Amounts in the quote asset. */
export interface Ledger {
  cash: number;
  /** Cash reserved by resting buy orders. */
  locked: number;
  positions: Record<string, Position>;
  realized: number;
  realized_today: number;
  fees_today: number;
  fees_total: number;
  /** The highest equity seen (for drawdown). */
  equity_peak: number;
  /** Equity when the current day began (for the daily P&L). */
  equity_day_start: number;
  operating_cash: number;
  day: number;
  /** The last 30 closed days. */
  days: DayRecord[];
}

export interface Fill {
  symbol: string;
  side: Side;
  qty: number;
  price: number;
  fee: number;
}

export function openLedger(cash: number, operatingCash: number): Ledger {
  return {
    cash,
    locked: 0,
    positions: {},
    realized: 0,
    realized_today: 0,
    fees_today: 0,
    fees_total: 0,
    equity_peak: cash,
    equity_day_start: cash,
    operating_cash: operatingCash,
    day: 0,
    days: [],
  };
}

/** Books a fill: cash moves (fees included), buys move the average price, sells realize P&L (before fees). */
export function applyFill(ledger: Ledger, fill: Fill): Ledger {
  const held = ledger.positions[fill.symbol] ?? { qty: 0, avg_price: 0 };
  const notional = fill.qty * fill.price;
  const positions = { ...ledger.positions };
  let realized = 0;
  let cash = ledger.cash - fill.fee;
  if (fill.side === "buy") {
    const qty = held.qty + fill.qty;
    positions[fill.symbol] = {
      qty: round(qty),
      avg_price: round((held.qty * held.avg_price + notional) / qty),
    };
    cash -= notional;
  } else {
    const qty = held.qty - fill.qty;
    realized += fill.qty * (fill.price - held.avg_price);
    cash += notional;
    if (qty <= 1e-9) delete positions[fill.symbol];
    else positions[fill.symbol] = { qty: round(qty), avg_price: held.avg_price };
  }
  return {
    ...ledger,
    cash: round(cash, 6),
    positions,
    realized: round(ledger.realized + realized, 6),
    realized_today: round(ledger.realized_today + realized, 6),
    fees_today: round(ledger.fees_today + fill.fee, 6),
    fees_total: round(ledger.fees_total + fill.fee, 6),
  };
}

export type Mids = (symbol: string) => number;

export function positionsValue(ledger: Ledger, mids: Mids): number {
  return Object.entries(ledger.positions).reduce((sum, [symbol, p]) => sum + p.qty * mids(symbol), 0);
}

export function equity(ledger: Ledger, mids: Mids): number {
  return ledger.cash + positionsValue(ledger, mids);
}

export function unrealized(ledger: Ledger, mids: Mids): number {
  return Object.entries(ledger.positions).reduce(
    (sum, [symbol, p]) => sum + p.qty * (mids(symbol) - p.avg_price),
    0,
  );
}

/** Gross exposure over equity: with long-only spot positions this is also the leverage. */
export function exposure(ledger: Ledger, mids: Mids): number {
  const eq = equity(ledger, mids);
  return eq <= 0 ? Number.POSITIVE_INFINITY : Math.abs(positionsValue(ledger, mids)) / eq;
}

export function drawdown(ledger: Ledger, mids: Mids): number {
  const eq = equity(ledger, mids);
  return ledger.equity_peak <= 0 ? 0 : Math.max(0, (ledger.equity_peak - eq) / ledger.equity_peak);
}

/**
 * Cash a booked resting buy holds back (quantity × limit): it is not free to spend until the order
 * fills or ends. `sign` +1 reserves it, -1 releases it.
 */
export function reserve(
  ledger: Ledger,
  order: { side: string; state: string; qty: number; limit_price: number | null },
  sign: 1 | -1,
): Ledger {
  if (order.side !== "buy" || order.state !== "new" || order.limit_price === null) return ledger;
  const locked = Math.max(0, ledger.locked + sign * order.qty * order.limit_price);
  return { ...ledger, locked: Math.round(locked * 1e6) / 1e6 };
}
