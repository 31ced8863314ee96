import type { Usage } from "../contracts/common.js";

/** USD per million tokens. */
export interface ModelPrice {
  inputPerMTok: number;
  outputPerMTok: number;
}

export type PriceTable = Readonly<Record<string, ModelPrice>>;

/**
 * Cost of one response from the configured price table. A model missing from the table costs 0
 * (local models usually are), so the cost budget only binds priced models: say so in config.
 */
export function costOf(table: PriceTable, model: string, usage: Usage): number {
  const price = table[model];
  if (!price) return 0;
  return (usage.inputTokens * price.inputPerMTok + usage.outputTokens * price.outputPerMTok) / 1_000_000;
}
