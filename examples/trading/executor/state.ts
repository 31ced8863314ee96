import type { ToolAuditNote } from "../../../shared/contracts/tool.js";
import type { RiskLimits, TradingConfig, TradingPolicy } from "./config.js";
import type { CanonicalState, Mode, Step } from "./contract.js";
import { type VenueOrder, restingFill } from "./exchange.js";
import type { GateContext } from "./gates.js";
import { type Ledger, applyFill, equity, openLedger, reserve, unrealized } from "./ledger.js";
import { type MarketModel, round } from "./market.js";
import { closeDay, riskScale, stopConditions, treasuryView } from "./treasury.js";

/** What the executor remembers of one planner decision: the gates it passed, the orders it made. */
export interface Decision {
  tick_id: string;
  /** plan hash → validation passed. */
  validated: Record<string, boolean>;
  /** plan hash → dry run passed. */
  dry_run: Record<string, boolean>;
  orders: string[];
  verification: "matched" | "drift" | "uncertain" | null;
  ledger_ref: string | null;
  /** What the decision was made from (the seed's replay inputs), as the planner read them. */
  inputs?: { state_hash?: string; market_hash?: string };
  planned_at?: string;
  executed_at?: string;
}

export interface Flags {
  trading_enabled: boolean;
  kill_switch_active: boolean;
  /** Safe recovery: no new entries until a verification finds everything reconciled. */
  new_entries_halted: boolean;
  /** The critical event that turned the kill switch on (only a human may turn it off). */
  critical: string | null;
}

/** What approved control changes set on top of the configuration the executor started with. */
export interface Overrides {
  mode?: Mode;
  risk_limits?: Partial<RiskLimits>;
  policy?: Partial<TradingPolicy>;
}

/** A human's approval the executor acted on (newest last, bounded); a token is honoured once. */
export interface ApprovalRecord {
  token: string;
  by: string;
  decided_at: number;
  action: string;
  decision_id: string;
  tick: number;
}

/** The executor's whole durable state: venue, book, flags, decisions and idempotency records. */
export interface ExecutorState {
  tick: number;
  /** Tick ids seen, newest last (bounded): a tick id maps to exactly one exchange tick. */
  tick_ids: string[];
  ledger: Ledger;
  orders: Record<string, VenueOrder>;
  flags: Flags;
  decisions: Record<string, Decision>;
  decision_order: string[];
  idem: Record<string, { hash: string; response: unknown }>;
  idem_order: string[];
  /** order_client_id → verification cycles it has stayed uncertain. */
  unresolved: Record<string, number>;
  /** Stop-trading conditions already raised (each raised once while it holds). */
  stops: string[];
  consecutive_errors: number;
  audit_seq: number;
  records: number;
  overrides: Overrides;
  /** Stop conditions whose critical alert a human approved suppressing. */
  suppressed: string[];
  approvals: ApprovalRecord[];
}

export const KEEP_DECISIONS = 64;
export const KEEP_IDEMPOTENCY = 256;
const KEEP_TICK_IDS = 200;
/** Settled orders are forgotten after this many ticks (the audit stream keeps them). */
const KEEP_ORDER_TICKS = 50;

export function initialState(config: TradingConfig): ExecutorState {
  return {
    tick: 0,
    tick_ids: [],
    ledger: openLedger(config.starting_cash, config.treasury.operating_cash),
    orders: {},
    flags: { trading_enabled: true, kill_switch_active: false, new_entries_halted: false, critical: null },
    decisions: {},
    decision_order: [],
    idem: {},
    idem_order: [],
    unresolved: {},
    stops: [],
    consecutive_errors: 0,
    audit_seq: 0,
    records: 0,
    overrides: {},
    suppressed: [],
    approvals: [],
  };
}

/** A state stored before approvals existed gains their empty fields. */
type Approvable = "overrides" | "suppressed" | "approvals";
export function upgradeState(
  state: Omit<ExecutorState, Approvable> & Partial<Pick<ExecutorState, Approvable>>,
): ExecutorState {
  return {
    ...state,
    overrides: state.overrides ?? {},
    suppressed: state.suppressed ?? [],
    approvals: state.approvals ?? [],
  };
}

/** The configuration in force: the one the executor started with, plus approved changes. */
export function effectiveConfig(config: TradingConfig, state: ExecutorState): TradingConfig {
  const o = state.overrides;
  if (!o.mode && !o.risk_limits && !o.policy) return config;
  return {
    ...config,
    mode: o.mode ?? config.mode,
    risk_limits: { ...config.risk_limits, ...o.risk_limits },
    policy: { ...config.policy, ...o.policy },
  };
}

/** Collects the audit notes of one call; the last one's id is the response's `audit_ref`. */
export class Notes {
  readonly notes: ToolAuditNote[] = [];

  constructor(
    private readonly state: ExecutorState,
    private readonly correlation: { decision_id: string; tick_id: string },
  ) {}

  add(
    step: Step,
    status: ToolAuditNote["status"],
    reason: string,
    options: {
      artifacts?: string[];
      actor?: string;
      critical?: boolean;
      extra?: Record<string, unknown>;
    } = {},
  ): string {
    this.state.audit_seq += 1;
    const audit_id = `exec-${this.state.audit_seq}`;
    const artifacts = options.artifacts ?? [];
    this.notes.push({
      status,
      reason,
      artifacts,
      data: {
        audit_id,
        decision_id: this.correlation.decision_id,
        tick_id: this.correlation.tick_id,
        step,
        actor: options.actor ?? "executor",
        status,
        reason,
        artifacts,
        ...(options.critical ? { severity: "critical" } : {}),
        ...options.extra,
      },
    });
    return audit_id;
  }

  ref(): string {
    return `exec-${this.state.audit_seq}`;
  }
}

/**
 * Maps a tick id to the exchange tick: a new id advances the market one step (closing the day when
 * one ends and filling resting orders the market crossed). An old id is refused: a tick's calls
 * happen in that tick.
 */
export function enterTick(
  state: ExecutorState,
  tickId: string,
  config: TradingConfig,
  market: MarketModel,
): string | undefined {
  const last = state.tick_ids.at(-1);
  if (last === tickId) return undefined;
  if (state.tick_ids.includes(tickId)) return `tick '${tickId}' is over; the current tick is '${last ?? ""}'`;
  state.tick += 1;
  state.tick_ids = [...state.tick_ids, tickId].slice(-KEEP_TICK_IDS);
  const mids = (s: string) => market.mid(s, state.tick);
  if (state.tick > 1 && (state.tick - 1) % config.ticks_per_day === 0)
    state.ledger = closeDay(state.ledger, config, mids);
  for (const order of Object.values(state.orders)) {
    const filled = restingFill(order, market.quote(order.symbol, state.tick), config.fee_bps);
    if (!filled?.fill) continue;
    state.orders[order.order_client_id] = filled.order;
    if (order.booked) state.ledger = applyFill(reserve(state.ledger, order, -1), filled.fill);
  }
  for (const [id, order] of Object.entries(state.orders)) {
    const settled = order.state !== "new" && state.unresolved[id] === undefined;
    if (settled && order.submitted_tick < state.tick - KEEP_ORDER_TICKS) delete state.orders[id];
  }
  touchPeak(state, market);
  return undefined;
}

export function touchPeak(state: ExecutorState, market: MarketModel): void {
  const eq = equity(state.ledger, (s) => market.mid(s, state.tick));
  if (eq > state.ledger.equity_peak) state.ledger = { ...state.ledger, equity_peak: round(eq, 6) };
}

export function gateContext(state: ExecutorState, config: TradingConfig, market: MarketModel): GateContext {
  const mid = (s: string) => market.mid(s, state.tick);
  const treasury = treasuryView(state.ledger, config, mid);
  const stops = stopConditions(state.ledger, config, mid, {
    kill_switch_active: false,
    unresolved_cycles: Math.max(0, ...Object.values(state.unresolved)),
  });
  return {
    config,
    ledger: state.ledger,
    quote: (s) => (market.isListed(s) ? market.quote(s, state.tick) : undefined),
    mid: (s) => (market.isListed(s) ? mid(s) : 0),
    isHighVol: (s) => market.isHighVol(s),
    flags: state.flags,
    unresolved: Object.keys(state.unresolved).length,
    treasury,
    scale: riskScale(treasury, config),
    stops,
  };
}

export function canonicalState(
  state: ExecutorState,
  config: TradingConfig,
  market: MarketModel,
): CanonicalState {
  const mid = (s: string) => market.mid(s, state.tick);
  const l = state.ledger;
  const view = treasuryView(l, config, mid);
  return {
    balances: [{ asset: "USD", free: round(l.cash - l.locked, 2), locked: round(l.locked, 2) }],
    positions: Object.entries(l.positions).map(([symbol, p]) => ({
      symbol,
      qty: p.qty,
      avg_price: p.avg_price,
      notional: round(p.qty * mid(symbol), 2),
    })),
    open_orders: Object.values(state.orders)
      .filter((o) => o.state === "new" || state.unresolved[o.order_client_id] !== undefined)
      .map((o) => ({
        order_client_id: o.order_client_id,
        symbol: o.symbol,
        side: o.side,
        qty: o.qty,
        price: o.limit_price,
        state: o.state,
      })),
    risk_limits: config.risk_limits,
    runtime_flags: {
      trading_enabled: state.flags.trading_enabled,
      kill_switch_active: state.flags.kill_switch_active,
      mode: config.mode,
      new_entries_halted: state.flags.new_entries_halted,
    },
    pnl: {
      realized: round(l.realized, 2),
      unrealized: round(unrealized(l, mid), 2),
      pnl_today: view.pnl_today,
      fees_today: round(l.fees_today, 2),
    },
    treasury: {
      principal_baseline: config.treasury.principal_baseline,
      rolling_surplus_30d: view.rolling_surplus_30d,
      runway_days: view.runway_days,
    },
  };
}
