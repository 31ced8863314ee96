import type { ErrorPayload } from "../contracts/common.js";
import { ReviewUsage } from "../contracts/rubric.js";
import type { Draft } from "./draft.js";
import { recordCost, recordUsage } from "./guard.js";
import type { LoopConfig } from "./state.js";
import { fail } from "./terminal.js";

/**
 * A review's model usage joins the run's: its tokens and cost count toward the run's budgets as
 * the generator's do, so a costly critic cannot spend past `maxCostUsd`. False when the guard
 * broke the run (it is failing now).
 */
export function chargeReview(d: Draft, config: LoopConfig, usage: ReviewUsage | undefined): boolean {
  if (!usage) return true;
  const s = d.state;
  s.usage = {
    ...s.usage,
    inputTokens: s.usage.inputTokens + usage.inputTokens,
    outputTokens: s.usage.outputTokens + usage.outputTokens,
    costUsd: s.usage.costUsd + usage.costUsd,
  };
  for (const check of [
    () => recordUsage(s.guard, s.limits, usage),
    () => recordCost(s.guard, s.limits, usage.costUsd),
  ]) {
    const { state, verdict } = check();
    s.guard = state;
    d.guard(verdict, { by: "critic" });
    if (verdict.kind === "circuitBreak") {
      fail(d, config, verdict.reason, verdict.message);
      return false;
    }
  }
  return true;
}

/** The usage a failed review reports in its error's details (a reply that was no verdict), if any. */
export function usageOfFailure(error: ErrorPayload): ReviewUsage | undefined {
  const usage = (error.details as { usage?: unknown } | undefined)?.usage;
  return usage === undefined ? undefined : ReviewUsage.safeParse(usage).data;
}
