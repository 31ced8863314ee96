import type { TradingConfig } from "./config.js";
import type { ExecutePlanRequest, ExecutionEntry, Verification, VerifiedOrder } from "./contract.js";
import { DRIFT_TOLERANCE_BPS, type VenueOrder, submit } from "./exchange.js";
import { RECHECK_STRATEGY, validate } from "./gates.js";
import { orderClientId, planHash } from "./ids.js";
import { applyFill, reserve } from "./ledger.js";
import type { MarketModel } from "./market.js";
import { type ExecutorState, type Notes, gateContext, touchPeak } from "./state.js";

/**
 * Why this execution may not happen, or undefined. This is where the gates are enforced: a passing
 * validation and a passing dry run of this exact plan in this decision, and the gates again now
 * (the kill switch may have been turned on since), whatever the planner claims.
 */
export function executionRefusal(
  state: ExecutorState,
  request: ExecutePlanRequest,
  config: TradingConfig,
  market: MarketModel,
): string[] {
  const decision = state.decisions[request.decision_id];
  if (!decision) return [`GATES_MISSING: decision '${request.decision_id}' has no validation`];
  if (decision.tick_id !== request.tick_id)
    return [`CORRELATION_MISMATCH: decision '${request.decision_id}' belongs to tick '${decision.tick_id}'`];
  if (request.execution_mode !== config.mode)
    return [
      `MODE_MISMATCH: execution_mode '${request.execution_mode}' but the executor runs '${config.mode}'`,
    ];
  const hash = planHash(request.approved_intents);
  const problems: string[] = [];
  if (decision.validated[hash] !== true)
    problems.push(`GATES_MISSING: no passing validation for plan ${hash.slice(0, 12)}`);
  if (decision.dry_run[hash] !== true)
    problems.push(`GATES_MISSING: no passing dry run for plan ${hash.slice(0, 12)}`);
  for (const intent of request.approved_intents) {
    if (intent.order_client_id !== orderClientId(request.decision_id, intent))
      problems.push(
        `ORDER_ID_MISMATCH: ${intent.intent_id} must use ${orderClientId(request.decision_id, intent)}`,
      );
  }
  const ids = new Set(request.approved_intents.map((i) => i.intent_id));
  if (ids.size !== request.approved_intents.length)
    problems.push("DUPLICATE_INTENT: intent ids must be unique");
  const now = validate(
    request.approved_intents.map((i) => ({ ...i, strategy_id: RECHECK_STRATEGY, expected_edge_bps: 0 })),
    gateContext(state, config, market),
  );
  if (!now.pass) problems.push(...now.blocking_reasons.map((r) => `GATE_FAILED_AT_EXECUTION: ${r}`));
  return problems;
}

/** Submits the approved intents; an order id the venue already has is never submitted twice. */
export function execute(
  state: ExecutorState,
  request: ExecutePlanRequest,
  config: TradingConfig,
  market: MarketModel,
): ExecutionEntry[] {
  const decision = state.decisions[request.decision_id];
  return request.approved_intents.map((intent) => {
    const known = state.orders[intent.order_client_id];
    if (known) {
      const unresolved = state.unresolved[known.order_client_id] !== undefined;
      return {
        intent_id: intent.intent_id,
        order_client_id: known.order_client_id,
        exchange_order_id: known.exchange_order_id,
        submit_status: unresolved ? "unknown" : known.submit_status,
        reject_code: unresolved ? "VERIFY_BEFORE_RESUBMIT" : "ALREADY_SUBMITTED",
      };
    }
    const result = submit(intent, {
      decision_id: request.decision_id,
      tick: state.tick,
      quote: market.quote(intent.symbol, state.tick),
      faults: config.faults,
      seed: config.seed,
      fee_bps: config.fee_bps,
    });
    state.orders[intent.order_client_id] = result.order;
    decision?.orders.push(intent.order_client_id);
    if (result.fill && result.order.booked) state.ledger = applyFill(state.ledger, result.fill);
    if (result.order.booked) state.ledger = reserve(state.ledger, result.order, 1);
    if (result.order.submit_status === "timeout") state.unresolved[intent.order_client_id] = 0;
    return {
      intent_id: intent.intent_id,
      order_client_id: intent.order_client_id,
      exchange_order_id: result.order.submit_status === "timeout" ? null : result.order.exchange_order_id,
      submit_status: result.order.submit_status,
      reject_code: result.reject_code,
    };
  });
}

function driftOf(order: VenueOrder, market: MarketModel, tick: number): string | undefined {
  if (order.avg_fill_price === null) return undefined;
  if (order.fill_qty > order.qty + 1e-9)
    return `${order.order_client_id} filled ${order.fill_qty} > ordered ${order.qty}`;
  const q = market.quote(order.symbol, order.submitted_tick);
  const touch = order.side === "buy" ? q.best_ask : q.best_bid;
  const off = (Math.abs(order.avg_fill_price - touch) / touch) * 10_000;
  if (off > DRIFT_TOLERANCE_BPS && tick >= order.submitted_tick)
    return `${order.order_client_id} filled at ${order.avg_fill_price}, ${Math.round(off)} bps from the quote ${touch}`;
  return undefined;
}

/**
 * Reconciles the venue's truth with our book. An order whose submit timed out is looked up: if it
 * landed, its fills are booked now; if the venue never had it, that is only certain once the tick
 * it was sent in is over. Until then it stays uncertain, and each verification that finds it so
 * counts a reconciliation cycle.
 */
export function verify(
  state: ExecutorState,
  ids: readonly string[],
  config: TradingConfig,
  market: MarketModel,
  notes: Notes,
): Verification {
  const wanted = ids.length > 0 ? ids : Object.keys(state.unresolved);
  const drift: string[] = [];
  let uncertain = false;
  const orders: VerifiedOrder[] = wanted.map((id) => {
    const order = state.orders[id];
    if (!order) {
      drift.push(`${id} is unknown to the venue and to our book`);
      return {
        order_client_id: id,
        exchange_order_id: null,
        final_state: "unknown",
        fill_qty: 0,
        avg_fill_price: null,
      };
    }
    let current = order;
    if (state.unresolved[id] !== undefined) {
      if (order.landed) {
        current = { ...order, booked: true };
        state.ledger = reserve(state.ledger, order, 1);
        if (order.fill_qty > 0 && order.avg_fill_price !== null)
          state.ledger = applyFill(state.ledger, {
            symbol: order.symbol,
            side: order.side,
            qty: order.fill_qty,
            price: order.avg_fill_price,
            fee: (order.fill_qty * order.avg_fill_price * config.fee_bps) / 10_000,
          });
        delete state.unresolved[id];
        notes.add("VERIFY", "passed", `reconciled ${id}: the timed-out submit had landed (${order.state})`, {
          artifacts: [id],
        });
      } else if (state.tick > order.submitted_tick) {
        delete state.unresolved[id];
        notes.add("VERIFY", "passed", `reconciled ${id}: the timed-out submit never reached the venue`, {
          artifacts: [id],
        });
      } else {
        state.unresolved[id] = (state.unresolved[id] ?? 0) + 1;
        uncertain = true;
      }
      state.orders[id] = current;
    }
    const reason = driftOf(current, market, state.tick);
    if (reason) drift.push(reason);
    const still = state.unresolved[id] !== undefined;
    return {
      order_client_id: id,
      exchange_order_id: current.exchange_order_id,
      final_state: still ? "unknown" : current.state,
      fill_qty: current.fill_qty,
      avg_fill_price: current.avg_fill_price,
    };
  });
  touchPeak(state, market);
  const overall = drift.length > 0 ? "drift" : uncertain ? "uncertain" : "matched";
  return { overall, orders, drift_reasons: uncertain ? [...drift, "submit outcome still unknown"] : drift };
}
