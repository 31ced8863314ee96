import { z } from "zod";
import { contentHash } from "../../../shared/runtime/hash.js";
import { Mode } from "./contract.js";

const Rate = z.number().min(0).max(1);

/** A listed symbol of the paper exchange and how its price moves. */
export const SymbolConfig = z.object({
  symbol: z.string().regex(/^[A-Z0-9-]{1,20}$/),
  start_price: z.number().positive(),
  /** Per-tick log-return standard deviation. */
  volatility: z.number().positive(),
  spread_bps: z.number().positive(),
  /** High-volatility symbols are the first dropped under defensive sizing. */
  high_vol: z.boolean().default(false),
});
export type SymbolConfig = z.infer<typeof SymbolConfig>;

/** Faults the paper exchange injects, each drawn deterministically from the seed. */
export const Faults = z.object({
  reject_rate: Rate.default(0),
  /** A submit that times out: the order may or may not have reached the book. */
  timeout_rate: Rate.default(0),
  /** Of timed-out submits, the share that did land. */
  timeout_landed_rate: Rate.default(0.5),
  partial_fill_rate: Rate.default(0),
  /** A fill far from the quote (beyond the slippage tolerance): what verification calls drift. */
  drift_rate: Rate.default(0),
  halt_rate: Rate.default(0),
  stale_rate: Rate.default(0),
  spread_spike_rate: Rate.default(0),
});
export type Faults = z.infer<typeof Faults>;

/** The hard risk limits: changed only through an approved control change, leverage never above 1. */
export const RiskLimits = z.strictObject({
  daily_loss_limit: z.number().positive(),
  max_drawdown: z.number().positive().max(1),
  max_notional_per_trade: z.number().positive(),
  max_portfolio_exposure: z.number().positive(),
  max_leverage: z.number().positive().max(1),
});
export type RiskLimits = z.infer<typeof RiskLimits>;

/** Which strategies may trade and which symbols they may open positions in. */
export const TradingPolicy = z.strictObject({
  allowed_strategies: z.array(z.string().min(1)).min(1),
  /** Symbols new orders may name; absent: every listed symbol. */
  universe: z.array(z.string().min(1)).min(1).optional(),
});
export type TradingPolicy = z.infer<typeof TradingPolicy>;

/**
 * Everything the executor decides with, hashed into every replay record: the exchange's seed and
 * faults, the hard risk limits, the cost model and the self-financing thresholds.
 */
export const TradingConfig = z.object({
  seed: z.string().min(1).default("paper-1"),
  mode: Mode.default("paper"),
  symbols: z
    .array(SymbolConfig)
    .min(1)
    .default([
      { symbol: "BTC-USD", start_price: 60_000, volatility: 0.01, spread_bps: 4, high_vol: false },
      { symbol: "ETH-USD", start_price: 3_000, volatility: 0.015, spread_bps: 6, high_vol: false },
      { symbol: "DOGE-USD", start_price: 0.15, volatility: 0.04, spread_bps: 20, high_vol: true },
    ]),
  faults: Faults.default(Faults.parse({})),
  starting_cash: z.number().positive().default(100_000),
  fee_bps: z.number().nonnegative().default(10),
  risk_limits: RiskLimits.default({
    daily_loss_limit: 2_000,
    max_drawdown: 0.1,
    max_notional_per_trade: 10_000,
    max_portfolio_exposure: 0.6,
    max_leverage: 1,
  }),
  /** Market sanity guardrails. */
  market: z
    .object({ max_spread_bps: z.number().positive(), max_vol_1m: z.number().positive() })
    .default({ max_spread_bps: 50, max_vol_1m: 0.05 }),
  /** The seed's cost model, per day. */
  costs: z
    .object({
      infra_cost: z.number().nonnegative(),
      data_cost: z.number().nonnegative(),
      ops_overhead: z.number().nonnegative(),
      reserve_accrual_rate: Rate,
    })
    .default({ infra_cost: 20, data_cost: 10, ops_overhead: 10, reserve_accrual_rate: 0.2 }),
  treasury: z
    .object({
      principal_baseline: z.number().nonnegative(),
      /** Cash set aside for operating costs, paid from and topped up by realized gains. */
      operating_cash: z.number().nonnegative(),
      target_surplus: z.number().nonnegative(),
      min_runway_days: z.number().nonnegative(),
      hard_min_runway_days: z.number().nonnegative(),
      reduced_factor: z.number().min(0).max(1),
      defensive_factor: z.number().min(0).max(1),
      /** Transfers between trading capital and operating cash above this amount need a human. */
      transfer_approval_threshold: z.number().nonnegative().default(1_000),
    })
    .default({
      principal_baseline: 95_000,
      operating_cash: 3_000,
      target_surplus: 500,
      min_runway_days: 30,
      hard_min_runway_days: 7,
      reduced_factor: 0.75,
      defensive_factor: 0.25,
      transfer_approval_threshold: 1_000,
    }),
  policy: TradingPolicy.default({ allowed_strategies: ["rebalance-v1"] }),
  /** How many ticks make a day (costs accrue and the daily P&L resets per day). */
  ticks_per_day: z.number().int().positive().default(4),
  /** Verification cycles an uncertain order may stay unresolved before trading stops. */
  max_reconcile_cycles: z.number().int().nonnegative().default(2),
  /** Executor errors in a row that turn the kill switch on. */
  max_consecutive_errors: z.number().int().positive().default(3),
});
export type TradingConfig = z.infer<typeof TradingConfig>;

export const configHash = (config: TradingConfig): string => contentHash(config);
