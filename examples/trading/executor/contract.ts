/**
 * The planner ↔ executor contract: the eight allowlisted functions, field for field as the seed
 * contract names them. Requests are strict (an unknown field is refused, so a planner cannot smuggle
 * a risk-limit change or a withdrawal into a call); decimals travel as JSON numbers.
 */
import { z } from "zod";

export const Id = z.string().min(1).max(200);
const Decimal = z.number().finite();
const Qty = z.number().finite().positive();

/** What every request carries: the seed's correlation identifiers. */
export const Correlation = z.strictObject({ decision_id: Id, tick_id: Id, idempotency_key: Id });
export type Correlation = z.infer<typeof Correlation>;

export const Side = z.enum(["buy", "sell"]);
export type Side = z.infer<typeof Side>;
export const OrderType = z.enum(["market", "limit"]);
export const TimeInForce = z.enum(["GTC", "IOC", "FOK"]);
export const OrderState = z.enum(["new", "partially_filled", "filled", "canceled", "rejected"]);
export type OrderState = z.infer<typeof OrderState>;
export const Mode = z.enum(["paper", "shadow", "live"]);
export type Mode = z.infer<typeof Mode>;

const OkOrError = z.enum(["ok", "error"]);
/** Every response: `status`, the function's own fields, `errors[]` and `audit_ref`. */
export const response = <T extends z.ZodRawShape>(fields: T, status: z.ZodType<string> = OkOrError) =>
  z.object({ status, ...fields, errors: z.array(z.string()), audit_ref: z.string() });

export const GetCanonicalStateRequest = Correlation.extend({ as_of: z.iso.datetime({ offset: true }) });
export type GetCanonicalStateRequest = z.infer<typeof GetCanonicalStateRequest>;

export const CanonicalState = z.object({
  balances: z.array(z.object({ asset: z.string(), free: Decimal, locked: Decimal })),
  positions: z.array(z.object({ symbol: z.string(), qty: Decimal, avg_price: Decimal, notional: Decimal })),
  open_orders: z.array(
    z.object({
      order_client_id: z.string(),
      symbol: z.string(),
      side: Side,
      qty: Decimal,
      price: Decimal.nullable(),
      state: OrderState,
    }),
  ),
  risk_limits: z.object({
    daily_loss_limit: Decimal,
    max_drawdown: Decimal,
    max_notional_per_trade: Decimal,
    max_portfolio_exposure: Decimal,
    max_leverage: Decimal,
  }),
  runtime_flags: z.object({
    trading_enabled: z.boolean(),
    kill_switch_active: z.boolean(),
    mode: Mode,
    /** Added to the seed's fields: safe recovery holds new entries until a verification reconciles. */
    new_entries_halted: z.boolean(),
  }),
  pnl: z.object({ realized: Decimal, unrealized: Decimal, pnl_today: Decimal, fees_today: Decimal }),
  treasury: z.object({ principal_baseline: Decimal, rolling_surplus_30d: Decimal, runway_days: z.number() }),
});
export type CanonicalState = z.infer<typeof CanonicalState>;
export const GetCanonicalStateResponse = response({
  /** Absent only when the call is refused (status "error"). */
  state: CanonicalState.optional(),
});

export const GetMarketSnapshotRequest = Correlation.extend({
  symbols: z.array(z.string().min(1)).min(1).max(50),
  max_staleness_sec: z.number().nonnegative(),
});
export type GetMarketSnapshotRequest = z.infer<typeof GetMarketSnapshotRequest>;
export const Quote = z.object({
  symbol: z.string(),
  best_bid: Decimal,
  best_ask: Decimal,
  mid: Decimal,
  spread_bps: z.number(),
  vol_1m: z.number(),
  staleness_sec: z.number(),
  halted: z.boolean(),
});
export type Quote = z.infer<typeof Quote>;
export const GetMarketSnapshotResponse = response({ market: z.array(Quote) });

export const PlanIntent = z.strictObject({
  symbol: z.string().min(1),
  side: Side,
  order_type: OrderType,
  qty: Qty,
  limit_price: Decimal.positive().nullable(),
  time_in_force: TimeInForce,
  strategy_id: z.string().min(1),
  expected_edge_bps: z.number(),
});
export type PlanIntent = z.infer<typeof PlanIntent>;
export const Plan = z.strictObject({ intents: z.array(PlanIntent).max(20), reason: z.string() });
export type Plan = z.infer<typeof Plan>;

export const ValidatePlanRequest = Correlation.extend({ plan: Plan });
export type ValidatePlanRequest = z.infer<typeof ValidatePlanRequest>;
export const GATE_NAMES = [
  "risk_limits",
  "runway_budget",
  "exposure_leverage",
  "market_sanity",
  "policy_guardrails",
] as const;
export const GateCheck = z.object({ name: z.enum(GATE_NAMES), pass: z.boolean(), detail: z.string() });
export type GateCheck = z.infer<typeof GateCheck>;
export const Validation = z.object({
  pass: z.boolean(),
  checks: z.array(GateCheck),
  blocking_reasons: z.array(z.string()),
});
export type Validation = z.infer<typeof Validation>;
export const ValidatePlanResponse = response({ validation: Validation });

/** The order-shaping fields of an intent: what the dry run simulates and the plan hash covers. */
export const DryRunIntent = PlanIntent.pick({
  symbol: true,
  side: true,
  order_type: true,
  qty: true,
  limit_price: true,
});
export type DryRunIntent = z.infer<typeof DryRunIntent>;
export const DryRunPlanRequest = Correlation.extend({
  plan: z.strictObject({ intents: z.array(DryRunIntent).max(20) }),
  assumptions: z.strictObject({ slippage_bps: z.number().nonnegative(), fee_bps: z.number().nonnegative() }),
});
export type DryRunPlanRequest = z.infer<typeof DryRunPlanRequest>;
export const DryRun = z.object({
  pass: z.boolean(),
  projected: z.array(
    z.object({
      symbol: z.string(),
      est_fill_price: Decimal,
      est_fee: Decimal,
      est_pnl_impact: Decimal,
      post_trade_exposure: Decimal,
    }),
  ),
  idempotency_conflicts: z.array(z.string()),
  blocking_reasons: z.array(z.string()),
});
export type DryRun = z.infer<typeof DryRun>;
export const DryRunPlanResponse = response({ dry_run: DryRun });

/** An intent cleared for execution: its order fields, its position in the plan and its order id. */
export const ApprovedIntent = PlanIntent.pick({
  symbol: true,
  side: true,
  order_type: true,
  qty: true,
  limit_price: true,
  time_in_force: true,
}).extend({ intent_id: Id, order_client_id: Id });
export type ApprovedIntent = z.infer<typeof ApprovedIntent>;
export const ExecutePlanRequest = Correlation.extend({
  execution_mode: Mode,
  approved_intents: z.array(ApprovedIntent).min(1).max(20),
});
export type ExecutePlanRequest = z.infer<typeof ExecutePlanRequest>;
export const SubmitStatus = z.enum(["acked", "rejected", "timeout", "unknown"]);
export type SubmitStatus = z.infer<typeof SubmitStatus>;
export const ExecutionEntry = z.object({
  intent_id: z.string(),
  order_client_id: z.string(),
  exchange_order_id: z.string().nullable(),
  submit_status: SubmitStatus,
  reject_code: z.string().nullable(),
});
export type ExecutionEntry = z.infer<typeof ExecutionEntry>;
export const ExecutePlanResponse = response(
  { execution: z.array(ExecutionEntry) },
  z.enum(["ok", "partial", "error"]),
);

export const VerifyExecutionRequest = Correlation.extend({ order_client_ids: z.array(Id).max(50) });
export type VerifyExecutionRequest = z.infer<typeof VerifyExecutionRequest>;
export const VerifiedOrder = z.object({
  order_client_id: z.string(),
  exchange_order_id: z.string().nullable(),
  final_state: z.enum([...OrderState.options, "unknown"]),
  fill_qty: Decimal,
  avg_fill_price: Decimal.nullable(),
});
export type VerifiedOrder = z.infer<typeof VerifiedOrder>;
export const Verification = z.object({
  overall: z.enum(["matched", "drift", "uncertain"]),
  orders: z.array(VerifiedOrder),
  drift_reasons: z.array(z.string()),
});
export type Verification = z.infer<typeof Verification>;
export const VerifyExecutionResponse = response({ verification: Verification });

export const RecordDecisionRequest = Correlation.extend({
  record: z.strictObject({
    plan_summary: z.string(),
    validation_summary: z.string(),
    execution_summary: z.string(),
    verification_summary: z.string(),
    state_delta: z.record(z.string(), z.unknown()),
    metrics: z.record(z.string(), z.unknown()),
  }),
});
export type RecordDecisionRequest = z.infer<typeof RecordDecisionRequest>;
export const RecordDecisionResponse = response({ ledger_ref: z.string() });

export const SetKillSwitchRequest = Correlation.extend({
  active: z.boolean(),
  reason: z.string().min(1),
  actor: z.string().min(1),
});
export type SetKillSwitchRequest = z.infer<typeof SetKillSwitchRequest>;
export const SetKillSwitchResponse = response({ kill_switch_active: z.boolean() });

/** The allowlist: function name → request schema. Nothing else is served. */
export const FUNCTIONS = {
  get_canonical_state: GetCanonicalStateRequest,
  get_market_snapshot: GetMarketSnapshotRequest,
  validate_plan: ValidatePlanRequest,
  dry_run_plan: DryRunPlanRequest,
  execute_plan: ExecutePlanRequest,
  verify_execution: VerifyExecutionRequest,
  record_decision: RecordDecisionRequest,
  set_kill_switch: SetKillSwitchRequest,
} as const;
export type FunctionName = keyof typeof FUNCTIONS;
export const FUNCTION_NAMES = Object.keys(FUNCTIONS) as FunctionName[];
export type RequestOf<F extends FunctionName> = z.infer<(typeof FUNCTIONS)[F]>;

/** Each function's response: the executor checks what it answers against these before replying. */
export const RESPONSES = {
  get_canonical_state: GetCanonicalStateResponse,
  get_market_snapshot: GetMarketSnapshotResponse,
  validate_plan: ValidatePlanResponse,
  dry_run_plan: DryRunPlanResponse,
  execute_plan: ExecutePlanResponse,
  verify_execution: VerifyExecutionResponse,
  record_decision: RecordDecisionResponse,
  set_kill_switch: SetKillSwitchResponse,
} as const satisfies Record<FunctionName, z.ZodType>;

/** The seed's `py_` names, served as aliases of the same functions. */
export const aliasOf = (name: FunctionName): string => `py_${name}`;

/** The seed's tick steps, carried in every audit note this domain writes. */
export const Step = z.enum(["PLAN", "VALIDATE", "DRY_RUN", "EXECUTE", "VERIFY", "RECORD", "CONTROL"]);
export type Step = z.infer<typeof Step>;
