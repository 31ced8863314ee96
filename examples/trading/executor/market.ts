import { xxh64 } from "../../../shared/runtime/hash.js";
import type { TradingConfig } from "./config.js";
import type { Quote } from "./contract.js";

/** A float in [0, 1) drawn from the seed and a path of labels: same inputs, same number, any order. */
export function draw(seed: string, ...path: (string | number)[]): number {
  return Number.parseInt(xxh64(`${seed}|${path.join("|")}`).slice(0, 13), 16) / 2 ** 52;
}

/** A standard normal deviate from two draws (Box–Muller). */
function normal(seed: string, ...path: (string | number)[]): number {
  const u = Math.max(draw(seed, ...path, "u"), 1e-12);
  const v = draw(seed, ...path, "v");
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

export const round = (value: number, digits = 8): number => {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
};

/**
 * The paper exchange's market: for each symbol a geometric random walk of the mid price, one step
 * per tick, with spreads, short-term volatility, halts and stale quotes drawn from the seed. A quote
 * is a pure function of (config, symbol, tick), so a replayed tick sees the same market.
 */
export class MarketModel {
  private readonly paths = new Map<string, number[]>();

  constructor(private readonly config: TradingConfig) {}

  symbols(): string[] {
    return this.config.symbols.map((s) => s.symbol);
  }

  isListed(symbol: string): boolean {
    return this.config.symbols.some((s) => s.symbol === symbol);
  }

  isHighVol(symbol: string): boolean {
    return this.config.symbols.find((s) => s.symbol === symbol)?.high_vol ?? false;
  }

  mid(symbol: string, tick: number): number {
    const listing = this.config.symbols.find((s) => s.symbol === symbol);
    if (!listing) throw new Error(`symbol '${symbol}' is not listed`);
    let path = this.paths.get(symbol);
    if (!path) {
      path = [listing.start_price];
      this.paths.set(symbol, path);
    }
    while (path.length <= tick) {
      const n = path.length;
      const step = listing.volatility * normal(this.config.seed, "walk", symbol, n);
      path.push((path[n - 1] as number) * Math.exp(step));
    }
    return path[tick] as number;
  }

  quote(symbol: string, tick: number): Quote {
    const { seed, faults } = this.config;
    const listing = this.config.symbols.find((s) => s.symbol === symbol);
    if (!listing) throw new Error(`symbol '${symbol}' is not listed`);
    const mid = this.mid(symbol, tick);
    const spike = draw(seed, "spike", symbol, tick) < faults.spread_spike_rate;
    const spreadBps =
      listing.spread_bps * (spike ? 25 : 1) * (0.8 + 0.4 * draw(seed, "spread", symbol, tick));
    const half = (mid * spreadBps) / 20_000;
    const stale = draw(seed, "stale", symbol, tick) < faults.stale_rate;
    const vol = listing.volatility * (0.5 + draw(seed, "vol", symbol, tick)) * (spike ? 3 : 1);
    return {
      symbol,
      best_bid: round(mid - half),
      best_ask: round(mid + half),
      mid: round(mid),
      spread_bps: round(spreadBps, 2),
      vol_1m: round(vol, 6),
      staleness_sec: round(
        stale ? 30 + 90 * draw(seed, "age", symbol, tick) : 2 * draw(seed, "age", symbol, tick),
        2,
      ),
      halted: draw(seed, "halt", symbol, tick) < faults.halt_rate,
    };
  }
}
