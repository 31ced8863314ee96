import { contentHash, sha256 } from "../../../shared/runtime/hash.js";
import { canonicalJson } from "../../../shared/runtime/canonical-json.js";
import type { DryRunIntent } from "./contract.js";

/** The seed's deterministic order id: one per (decision, intent, symbol, side, qty, limit price). */
export function orderClientId(
  decisionId: string,
  intent: { intent_id: string; symbol: string; side: string; qty: number; limit_price: number | null },
): string {
  const key = [decisionId, intent.intent_id, intent.symbol, intent.side, intent.qty, intent.limit_price];
  return `oc-${sha256(canonicalJson(key)).slice(0, 24)}`;
}

/** Intent ids by position, when a plan names none: the planner and the executor agree on them. */
export const intentIdAt = (index: number): string => `intent-${index + 1}`;

/**
 * The hash that ties validation, dry run and execution to one plan: the order-shaping fields of
 * each intent, in order. Validation and dry run record it; execution demands both for the same hash.
 */
export function planHash(intents: readonly DryRunIntent[]): string {
  return contentHash(
    intents.map((i) => ({
      symbol: i.symbol,
      side: i.side,
      order_type: i.order_type,
      qty: i.qty,
      limit_price: i.limit_price,
    })),
  );
}
