import { z } from "zod";
import type { Usage } from "../contracts/common.js";
import type { ModelRef } from "../contracts/model.js";

/** USD per million tokens; cached input (read from a provider's prompt cache) at its own price when set. */
export const ModelPrice = z.strictObject({
  inputPerMTok: z.number().nonnegative().finite(),
  outputPerMTok: z.number().nonnegative().finite(),
  cachedInputPerMTok: z.number().nonnegative().finite().optional(),
});
export type ModelPrice = z.infer<typeof ModelPrice>;

/** Prices by model: the key is a ModelRef's `model`, or `provider:model` (which wins) to tell providers apart. */
export const PriceTable = z.record(z.string().min(1), ModelPrice);
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/** A model's price: `provider:model` first, then the bare model name. */
export function priceOf(table: PriceTable, model: string, provider?: string): ModelPrice | undefined {
  const qualified = provider === undefined ? undefined : table[`${provider}:${model}`];
  return qualified ?? table[model];
}

/**
 * Cost of one response from the configured price table. A model missing from the table costs 0:
 * a run with a cost budget never gets that far, since its submit is refused (see unpricedModel).
 * Cached input tokens are part of `inputTokens`, priced at the cached rate (the input rate when
 * the table has none).
 */
export function costOf(table: PriceTable, model: string, usage: Usage, provider?: string): number {
  const price = priceOf(table, model, provider);
  if (!price) return 0;
  const cached = Math.min(usage.cachedInputTokens ?? 0, usage.inputTokens);
  const uncached = usage.inputTokens - cached;
  const cachedPrice = price.cachedInputPerMTok ?? price.inputPerMTok;
  return (
    (uncached * price.inputPerMTok + cached * cachedPrice + usage.outputTokens * price.outputPerMTok) /
    1_000_000
  );
}

/** A millionth of a dollar: the unit a tree's cost counter adds, since JetStream counters add integers. */
export const MICRO_USD = 1_000_000;

/** A cost in whole micro-dollars, rounded to the nearest (so each response is off by half a micro-dollar at most). */
export function toMicroUsd(costUsd: number): number {
  return Math.round(costUsd * MICRO_USD);
}

/**
 * Why a run with a cost budget may not use `ref`, undefined when it may: a model asked over HTTP
 * (hosted or on loopback) must have a price, or every call would cost 0 and the budget bind nothing.
 * A scripted model costs what its script says, and a model actor what its replies say.
 */
export function unpricedModel(ref: ModelRef, table: PriceTable): string | undefined {
  if (ref.provider !== "openai" && ref.provider !== "anthropic") return undefined;
  if (priceOf(table, ref.model, ref.provider)) return undefined;
  return `model '${ref.provider}:${ref.model}' has no price, so a cost budget cannot bind it: add it to the price table (MODEL_PRICES or MODEL_PRICES_FILE on the supervisor, agents and critic; a local model may be priced at 0) or set agent.resources.maxCostUsd to 0 (unlimited)`;
}
