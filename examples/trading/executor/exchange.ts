import type { Faults } from "./config.js";
import type { ApprovedIntent, OrderState, Quote, SubmitStatus } from "./contract.js";
import type { Fill } from "./ledger.js";
import { draw, round } from "./market.js";

/** The paper venue's truth about one order (what verification reads). */
export interface VenueOrder {
  order_client_id: string;
  intent_id: string;
  decision_id: string;
  exchange_order_id: string | null;
  symbol: string;
  side: "buy" | "sell";
  order_type: "market" | "limit";
  time_in_force: "GTC" | "IOC" | "FOK";
  qty: number;
  limit_price: number | null;
  /** Whether the venue has the order at all (false after a timeout that never reached it). */
  landed: boolean;
  state: OrderState;
  fill_qty: number;
  avg_fill_price: number | null;
  /** What the submitter was told. */
  submit_status: SubmitStatus;
  submitted_tick: number;
  /** Whether our ledger has booked this order's fills (false until an unknown submit is reconciled). */
  booked: boolean;
}

export interface Submission {
  order: VenueOrder;
  /** The fill the venue made, when it made one. */
  fill?: Fill;
  reject_code: string | null;
}

/** How far a fill may stray from the touch before verification calls it drift. */
export const DRIFT_TOLERANCE_BPS = 100;

function marketable(intent: ApprovedIntent, quote: Quote): boolean {
  if (intent.order_type === "market" || intent.limit_price === null) return true;
  return intent.side === "buy" ? intent.limit_price >= quote.best_ask : intent.limit_price <= quote.best_bid;
}

/**
 * Submits one order to the paper venue. Everything that can go wrong is drawn from the seed and the
 * order's id, so a replay of the same tick meets the same faults: a reject, a timeout (the caller
 * learns nothing; the order landed or not), a partial fill, a fill far from the quote (drift).
 */
export function submit(
  intent: ApprovedIntent,
  ctx: { decision_id: string; tick: number; quote: Quote; faults: Faults; seed: string; fee_bps: number },
): Submission {
  const { faults, seed } = ctx;
  const id = intent.order_client_id;
  const base: VenueOrder = {
    order_client_id: id,
    intent_id: intent.intent_id,
    decision_id: ctx.decision_id,
    exchange_order_id: null,
    symbol: intent.symbol,
    side: intent.side,
    order_type: intent.order_type,
    time_in_force: intent.time_in_force,
    qty: intent.qty,
    limit_price: intent.limit_price,
    landed: true,
    state: "new",
    fill_qty: 0,
    avg_fill_price: null,
    submit_status: "acked",
    submitted_tick: ctx.tick,
    booked: true,
  };
  if (ctx.quote.halted || draw(seed, "reject", id) < faults.reject_rate) {
    const code = ctx.quote.halted ? "SYMBOL_HALTED" : "VENUE_REJECT";
    return { order: { ...base, state: "rejected", submit_status: "rejected" }, reject_code: code };
  }
  const timedOut = draw(seed, "timeout", id) < faults.timeout_rate;
  const landed = !timedOut || draw(seed, "landed", id) < faults.timeout_landed_rate;
  const order: VenueOrder = {
    ...base,
    exchange_order_id: landed ? `px-${id.slice(3, 19)}` : null,
    landed,
    submit_status: timedOut ? "timeout" : "acked",
    booked: !timedOut,
    state: landed ? "new" : "rejected",
  };
  if (!landed) return { order, reject_code: null };
  if (!marketable(intent, ctx.quote)) {
    const rests = intent.time_in_force === "GTC";
    return { order: { ...order, state: rests ? "new" : "canceled" }, reject_code: null };
  }
  const partial = draw(seed, "partial", id) < faults.partial_fill_rate && intent.time_in_force !== "FOK";
  const qty = round(partial ? intent.qty * (0.3 + 0.4 * draw(seed, "partial-qty", id)) : intent.qty);
  const touch = intent.side === "buy" ? ctx.quote.best_ask : ctx.quote.best_bid;
  const drift = draw(seed, "drift", id) < faults.drift_rate ? 3 * DRIFT_TOLERANCE_BPS : 0;
  const signed = intent.side === "buy" ? 1 : -1;
  const price = round(touch * (1 + (signed * drift) / 10_000));
  const fee = round((qty * price * ctx.fee_bps) / 10_000, 6);
  return {
    order: { ...order, state: partial ? "partially_filled" : "filled", fill_qty: qty, avg_fill_price: price },
    fill: { symbol: intent.symbol, side: intent.side, qty, price, fee },
    reject_code: null,
  };
}

/** A resting GTC order fills once the market crosses its limit. */
export function restingFill(order: VenueOrder, quote: Quote, feeBps: number): Submission | undefined {
  if (order.state !== "new" || !order.landed || order.limit_price === null || quote.halted) return undefined;
  const crosses =
    order.side === "buy" ? quote.best_ask <= order.limit_price : quote.best_bid >= order.limit_price;
  if (!crosses) return undefined;
  const price = order.limit_price;
  const fee = round((order.qty * price * feeBps) / 10_000, 6);
  return {
    order: { ...order, state: "filled", fill_qty: order.qty, avg_fill_price: price },
    fill: { symbol: order.symbol, side: order.side, qty: order.qty, price, fee },
    reject_code: null,
  };
}
