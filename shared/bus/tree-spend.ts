import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { MICRO_USD, toMicroUsd } from "../models/pricing.js";
import type { Subjects } from "./subjects.js";
import { addToCounter, readCounter, type TreeCap } from "./tree-iterations.js";

/**
 * What a run tree has spent, as its JetStream counters say: tokens, and cost in whole
 * micro-dollars (a counter adds integers, exactly under any number of writers; a float would not).
 */
export interface TreeSpent {
  tokens: number;
  costMicroUsd: number;
}

/** Which of a tree's spending budgets is spent, and how to say so. */
export interface SpentBudget {
  budget: "cost" | "tokens";
  message: string;
}

/** Whether the tree's root set a cost or token budget, which then bounds the whole tree. */
export function hasSpendBudget(budget: TreeCap): boolean {
  return budget.maxCostUsd !== undefined || budget.maxTokens !== undefined;
}

/** The tree's spending budget that `spent` has passed, or undefined while both hold. Pure. */
export function spentBudget(rootRunId: string, budget: TreeCap, spent: TreeSpent): SpentBudget | undefined {
  const { maxCostUsd, maxTokens } = budget;
  if (maxCostUsd !== undefined && spent.costMicroUsd > toMicroUsd(maxCostUsd)) {
    const usd = (spent.costMicroUsd / MICRO_USD).toFixed(6);
    return {
      budget: "cost",
      message: `run tree ${rootRunId} spent $${usd}, past its cost budget of $${maxCostUsd} (its root's maxCostUsd)`,
    };
  }
  if (maxTokens !== undefined && spent.tokens > maxTokens) {
    return {
      budget: "tokens",
      message: `run tree ${rootRunId} used ${spent.tokens} tokens, past its budget of ${maxTokens} (its root's maxTokensBudget)`,
    };
  }
  return undefined;
}

/**
 * Adds one step's spend to the tree's counters (two `Nats-Incr` publishes, together); resolves
 * with the totals after them, everyone's adds included. Not retried, as addIterations is not.
 */
export async function addSpend(
  deps: { nc: NatsConnection; subjects: Subjects },
  rootRunId: string,
  tokens: number,
  costUsd: number,
): Promise<TreeSpent> {
  const [tokenTotal, costTotal] = await Promise.all([
    addToCounter(deps, rootRunId, "tokens", tokens),
    addToCounter(deps, rootRunId, "costMicroUsd", toMicroUsd(costUsd)),
  ]);
  return { tokens: tokenTotal, costMicroUsd: costTotal };
}

/** The tree's spend now (a direct get of each counter's last message). */
export async function readSpend(
  deps: { jsm: JetStreamManager; subjects: Subjects },
  rootRunId: string,
): Promise<TreeSpent> {
  const [tokens, costMicroUsd] = await Promise.all([
    readCounter(deps, rootRunId, "tokens"),
    readCounter(deps, rootRunId, "costMicroUsd"),
  ]);
  return { tokens, costMicroUsd };
}
