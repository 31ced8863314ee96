import type { z } from "zod";
import { type AnyTool, defineTool } from "../../shared/tools/tool.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { FUNCTIONS, FUNCTION_NAMES, type FunctionName, RESPONSES, aliasOf } from "./contract.js";
import type { ExecutorStore } from "./store.js";

const DESCRIPTIONS: Record<FunctionName, string> = {
  get_canonical_state: "Balances, positions, open orders, risk limits, runtime flags, P&L and treasury.",
  get_market_snapshot: "Best bid/ask, mid, spread, 1-minute volatility, staleness and halt flag per symbol.",
  validate_plan: "Runs the five mandatory gates on a plan; execution needs a pass for this exact plan.",
  dry_run_plan:
    "Simulates fills, fees, slippage, post-trade exposure and order-id collisions for a validated plan.",
  execute_plan:
    "Submits the approved intents of a validated, dry-run plan; order_client_id must be the deterministic id.",
  verify_execution:
    "Reconciles the venue's truth with the book for the given orders (or every uncertain one).",
  record_decision:
    "Persists the decision, its summaries, state delta and metrics; returns a ledger reference.",
  set_kill_switch:
    "Turns the kill switch on (always allowed) or off (needs a human approval after a critical event).",
};

/**
 * The eight allowlisted functions as tools (and their seed `py_` aliases). Each validates its
 * request strictly, runs in the executor's durable core, and returns the response with the
 * executor's audit notes, which the runtime records in the calling run's audit trail.
 */
export function executorTools(store: ExecutorStore): AnyTool[] {
  return FUNCTION_NAMES.flatMap((fn) => {
    const build = (name: string): AnyTool =>
      defineTool({
        name,
        description: DESCRIPTIONS[fn],
        input: FUNCTIONS[fn] as z.ZodType<unknown>,
        capability: { kind: "compute" },
        timeoutMs: 10_000,
        reversibility: fn === "execute_plan" ? "irreversible" : "pure",
        // Every function answers a repeated idempotency key with its recorded response.
        idempotent: true,
        execute: async (input) => {
          const outcome = await store.call(fn, input as never);
          const checked = RESPONSES[fn].safeParse(outcome.response);
          if (!checked.success)
            throw new AgentError(
              "INTERNAL",
              `${fn} produced a response outside its contract: ${checked.error.message}`,
            );
          return { output: outcome.response, audit: outcome.notes };
        },
      });
    return [build(fn), build(aliasOf(fn))];
  });
}
