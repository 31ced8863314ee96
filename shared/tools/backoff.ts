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

/**
 * The pause before asking again for a service nobody serves yet: from 50 ms, doubling, never more
 * than a second, jittered so that callers waiting for the same service do not ask in step.
 */
export function servicePollDelay(asked: number, random: Random): number {
  return Math.max(1, fullJitterDelay(asked, { baseDelayMs: 50, maxDelayMs: 1_000 }, random));
}
