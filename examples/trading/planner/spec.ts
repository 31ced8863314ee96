import type { ModelRef } from "../../../shared/contracts/model.js";
import { RunSpec } from "../../../shared/contracts/run-spec.js";
import { FUNCTION_NAMES } from "../executor/contract.js";
import type { z } from "zod";
import type { TickTask } from "./tick.js";

/** The model actor name the deterministic planner serves. */
export const PLANNER_ACTOR = "trading-planner";

/** What an LLM planner is told; the tools it is offered carry their JSON schemas. */
export const LLM_PLANNER_PROMPT = [
  "You are the planner of a trading tick. You may only call the executor's allowlisted functions.",
  "Every call carries the tick's decision_id and tick_id and a fresh idempotency_key.",
  "Order of work: get_canonical_state, get_market_snapshot, then a plan; validate_plan;",
  "if validation fails, record a no-op decision with the blocking reasons as remediation hints.",
  "If it passes, dry_run_plan; if the dry run fails, shrink the plan and validate again (at most twice) or abort.",
  "Then execute_plan with intent ids intent-1, intent-2… and the deterministic order_client_id,",
  "verify_execution for the orders, and on drift turn the kill switch on; finally record_decision.",
  "The executor enforces every gate: skipping one only gets the call refused.",
  'End with a JSON object {"decision_id","tick_id","outcome","ledger_ref","reason"} and nothing else.',
].join(" ");

/**
 * The run of one tick: the task as JSON, the eight functions as tools, the deterministic planner
 * (or the given model), and a verifier that commits the tick only once its decision is recorded.
 */
export function tickSpec(
  task: z.input<typeof TickTask>,
  options: { model?: ModelRef; runId?: string } = {},
): RunSpec {
  const model: ModelRef = options.model ?? { provider: "actor", name: PLANNER_ACTOR };
  return RunSpec.parse({
    schemaVersion: 1,
    ...(options.runId ? { runId: options.runId } : {}),
    task: {
      prompt: JSON.stringify(task),
      verifiers: [
        {
          kind: "jsonSchema",
          schema: {
            type: "object",
            required: ["decision_id", "tick_id", "outcome", "ledger_ref"],
            properties: { ledger_ref: { type: "string", pattern: "^ledger-" } },
          },
        },
      ],
    },
    agent: {
      name: "trading-planner",
      model,
      ...(options.model ? { systemPrompt: LLM_PLANNER_PROMPT } : {}),
      tools: [...FUNCTION_NAMES],
      capabilities: [{ kind: "compute" }],
      resources: { maxIterations: 24, maxToolCalls: 30, maxCostUsd: 0, maxRepairs: 1 },
    },
  });
}
