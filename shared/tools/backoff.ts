import type { Random } from "../runtime/random.js";

export interface BackoffOptions {
  baseDelayMs: number;
  maxDelayMs: number;
}

/** Exponential backoff with full jitter: a uniform delay in [0, min(max, base·2^attempt)). */
export function fullJitterDelay(attempt: number, options: BackoffOptions, random: Random): number {
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** attempt);
  return Math.floor(random.next() * ceiling);
}
