import type { PriceTable } from "./pricing.js";

/** The date of the providers' published list prices below (not updated since). */
export const DEFAULT_PRICES_TAKEN = "2025-08";

/**
 * List prices (USD per million tokens) of common hosted models, as of DEFAULT_PRICES_TAKEN: a
 * starting point, not a promise. Providers change prices and contracts differ, so operators set
 * their own (MODEL_PRICES, MODEL_PRICES_FILE), which replace these model by model.
 */
export const DEFAULT_PRICES: PriceTable = {
  "gpt-5": { inputPerMTok: 1.25, cachedInputPerMTok: 0.125, outputPerMTok: 10 },
  "gpt-5-mini": { inputPerMTok: 0.25, cachedInputPerMTok: 0.025, outputPerMTok: 2 },
  "gpt-5-nano": { inputPerMTok: 0.05, cachedInputPerMTok: 0.005, outputPerMTok: 0.4 },
  "gpt-4.1": { inputPerMTok: 2, cachedInputPerMTok: 0.5, outputPerMTok: 8 },
  "gpt-4.1-mini": { inputPerMTok: 0.4, cachedInputPerMTok: 0.1, outputPerMTok: 1.6 },
  "gpt-4.1-nano": { inputPerMTok: 0.1, cachedInputPerMTok: 0.025, outputPerMTok: 0.4 },
  "gpt-4o": { inputPerMTok: 2.5, cachedInputPerMTok: 1.25, outputPerMTok: 10 },
  "gpt-4o-mini": { inputPerMTok: 0.15, cachedInputPerMTok: 0.075, outputPerMTok: 0.6 },
  o3: { inputPerMTok: 2, cachedInputPerMTok: 0.5, outputPerMTok: 8 },
  "o4-mini": { inputPerMTok: 1.1, cachedInputPerMTok: 0.275, outputPerMTok: 4.4 },
  "claude-opus-4-1": { inputPerMTok: 15, cachedInputPerMTok: 1.5, outputPerMTok: 75 },
  "claude-sonnet-4-0": { inputPerMTok: 3, cachedInputPerMTok: 0.3, outputPerMTok: 15 },
  "claude-sonnet-4-20250514": { inputPerMTok: 3, cachedInputPerMTok: 0.3, outputPerMTok: 15 },
  "claude-3-7-sonnet-latest": { inputPerMTok: 3, cachedInputPerMTok: 0.3, outputPerMTok: 15 },
  "claude-3-5-haiku-latest": { inputPerMTok: 0.8, cachedInputPerMTok: 0.08, outputPerMTok: 4 },
};
