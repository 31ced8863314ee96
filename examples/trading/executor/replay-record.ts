import { contentHash } from "../../../shared/runtime/hash.js";
import { type TradingConfig, configHash } from "./config.js";
import type { RecordDecisionRequest } from "./contract.js";
import type { Decision } from "./state.js";

const hashes = (byHash: Record<string, boolean>, pass: boolean): string[] =>
  Object.entries(byHash)
    .filter(([, ok]) => ok === pass)
    .map(([hash]) => hash);

/**
 * The seed's replay record of one decision, carried by its RECORD audit event: the inputs it was
 * made from (state, market and configuration hashes), the plans the gates judged (by plan hash),
 * the orders, the verification, the outputs and the timestamps. Two decisions with the same inputs
 * and the same deterministic planner have the same plan, validation and execution-intent fields.
 */
export function replayRecord(
  request: RecordDecisionRequest,
  decision: Decision,
  config: TradingConfig,
): Record<string, unknown> {
  const r = request.record;
  return {
    decision_id: request.decision_id,
    tick_id: request.tick_id,
    inputs: {
      state_hash: decision.inputs?.state_hash ?? null,
      market_hash: decision.inputs?.market_hash ?? null,
      config_hash: configHash(config),
    },
    plan: { summary: r.plan_summary, plan_hashes: Object.keys(decision.validated) },
    validation: {
      summary: r.validation_summary,
      passed: hashes(decision.validated, true),
      failed: hashes(decision.validated, false),
    },
    dry_run: { passed: hashes(decision.dry_run, true), failed: hashes(decision.dry_run, false) },
    execution: { summary: r.execution_summary, order_client_ids: decision.orders },
    verification: { summary: r.verification_summary, overall: decision.verification },
    outputs: { state_delta_hash: contentHash(r.state_delta), metrics: r.metrics },
    timestamps: { planned_at: decision.planned_at ?? null, executed_at: decision.executed_at ?? null },
  };
}
