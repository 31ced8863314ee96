/** Order statistics over samples: the bench reports medians and tails, never means of noisy timings. */
export interface Summary {
  n: number;
  min: number;
  p50: number;
  p99: number;
  max: number;
}

/** The q-quantile (0..1) by the nearest-rank method; NaN for no samples. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

export function median(samples: readonly number[]): number {
  return quantile(samples, 0.5);
}

export function summarize(samples: readonly number[]): Summary {
  return {
    n: samples.length,
    min: quantile(samples, 0),
    p50: quantile(samples, 0.5),
    p99: quantile(samples, 0.99),
    max: quantile(samples, 1),
  };
}

/** Rounds for the report: three significant digits is all a shared machine's timings carry. */
export function round(value: number): number {
  if (!Number.isFinite(value) || value === 0) return value;
  const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(value))));
  return Number(value.toFixed(digits));
}
