import type { z } from "zod";
import { type AnyTool, defineTool } from "../../../shared/tools/tool.js";
import { AgentError } from "../../../shared/runtime/errors.js";
import { FUNCTION_NAMES, aliasOf } from "./contract.js";
import {
  CONTROL_FUNCTION,
  EXECUTOR_FUNCTIONS,
  EXECUTOR_RESPONSES,
  type ExecutorFunction,
} from "./control-contract.js";
import type { ExecutorStore } from "./store.js";

const DESCRIPTIONS: Record<ExecutorFunction, string> = {
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
  apply_control_change:
    "Operator only: live mode, hard risk limits, strategy/universe, alert overrides, treasury transfers; a human approves.",
};

/**
 * The eight allowlisted functions as tools (and their seed `py_` aliases), plus the operator's
 * control change (never offered to a tick's planner). Each validates its request strictly, runs in
 * the executor's durable core, and returns the response with the executor's audit notes, which the
 * runtime records in the calling run's audit trail. A call that needs a human's approval fails with
 * APPROVAL_REQUIRED and the token to approve; the runtime holds the run until someone decides.
 */
export function executorTools(store: ExecutorStore): AnyTool[] {
  const build = (fn: ExecutorFunction, name: string): AnyTool =>
    defineTool({
      name,
      description: DESCRIPTIONS[fn],
      input: EXECUTOR_FUNCTIONS[fn] as z.ZodType<unknown>,
      capability: { kind: "compute" },
      timeoutMs: 10_000,
      reversibility: fn === "execute_plan" ? "irreversible" : "pure",
      // Every function answers a repeated idempotency key with its recorded response.
      idempotent: true,
      execute: async (input, ctx) => {
        const outcome = await store.call(fn, input as never, ctx.approval);
        if (outcome.approval)
          throw new AgentError(
            "APPROVAL_REQUIRED",
            `${name} needs a human's approval: ${outcome.approval.reason}`,
            {
              details: outcome.approval,
            },
          );
        const checked = EXECUTOR_RESPONSES[fn].safeParse(outcome.response);
        if (!checked.success)
          throw new AgentError(
            "INTERNAL",
            `${fn} produced a response outside its contract: ${checked.error.message}`,
          );
        return { output: outcome.response, audit: outcome.notes };
      },
    });
  return [
    ...FUNCTION_NAMES.flatMap((fn) => [build(fn, fn), build(fn, aliasOf(fn))]),
    build(CONTROL_FUNCTION, CONTROL_FUNCTION),
  ];
}
