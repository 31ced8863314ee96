import { RunSpec } from "../../../shared/contracts/run-spec.js";
import { CONTROL_FUNCTION, type ControlChange } from "./control-contract.js";

/** What an operator asks for: one control change, or turning the kill switch off. */
export type ControlAction =
  { fn: typeof CONTROL_FUNCTION; change: ControlChange } | { fn: "set_kill_switch"; active: boolean };

/**
 * The run of one operator action: a scripted agent makes the one call and reports. When the
 * executor asks for a human's approval the run waits in `awaiting_approval` until someone runs
 * `agentctl approve <runId> --by <name>` (or `reject`); the approver lands in the audit trail and
 * in the executor's state. `id` correlates the call (decision_id, tick_id, idempotency_key).
 */
export function controlSpec(
  action: ControlAction,
  options: { id: string; reason: string; by: string; runId?: string },
): RunSpec {
  const ids = { decision_id: options.id, tick_id: options.id, idempotency_key: options.id };
  const input =
    action.fn === CONTROL_FUNCTION
      ? { ...ids, change: action.change, reason: options.reason, requested_by: options.by }
      : { ...ids, active: action.active, reason: options.reason, actor: options.by };
  return RunSpec.parse({
    schemaVersion: 1,
    ...(options.runId ? { runId: options.runId } : {}),
    task: {
      prompt: `Operator ${options.by}: ${action.fn} (${options.reason})`,
      verifiers: [{ kind: "nonEmpty" }],
    },
    agent: {
      name: "trading-operator",
      model: {
        provider: "scripted",
        script: [
          { toolCalls: [{ name: action.fn, input }] },
          { text: `${action.fn} requested by ${options.by}; the outcome is in the audit trail` },
        ],
      },
      tools: [action.fn],
      capabilities: [{ kind: "compute" }],
      resources: { maxIterations: 4, maxToolCalls: 2, maxCostUsd: 0, maxRepairs: 0 },
    },
  });
}
