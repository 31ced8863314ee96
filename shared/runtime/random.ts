/** Randomness is injected (jitter, ids) so tests and replays are reproducible. */
export interface Random {
  /** A float in [0, 1). */
  next(): number;
}

export const systemRandom: Random = { next: () => Math.random() };

/** mulberry32: a tiny, fast, seedable generator; good enough for jitter, not for secrets. */
export function seededRandom(seed: number): Random {
  let a = seed >>> 0;
  return {
    next(): number {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    },
  };
}
