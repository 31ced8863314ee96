import type { Reversibility, ToolDescriptor } from "../contracts/tool.js";

/** A tool call that ran to completion, as the saga needs to remember it. */
export interface CompletedAction {
  actionId: string;
  tool: string;
  input: unknown;
  output: unknown;
  reversibility: Reversibility;
  compensation?: { tool: string };
}

/** What the saga remembers of a call that completed: nothing for a tool with no side effect. */
export function completedAction(
  descriptor: ToolDescriptor | undefined,
  call: { actionId: string; tool: string; input: unknown },
  output: unknown,
): CompletedAction | undefined {
  if (!descriptor || descriptor.reversibility === "pure") return undefined;
  return {
    actionId: call.actionId,
    tool: call.tool,
    input: call.input,
    output,
    reversibility: descriptor.reversibility,
    ...(descriptor.compensation ? { compensation: descriptor.compensation } : {}),
  };
}

export interface CompensationPlan {
  /** Compensating calls to make, most recent action first. */
  steps: { actionId: string; tool: string; input: { original: unknown; output: unknown } }[];
  /** Side effects nothing can undo: a human must look at these. */
  manual: { actionId: string; tool: string; reason: string }[];
}

/** On FAIL after side effects: undo completed non-pure actions in reverse order. */
export function planCompensation(actions: readonly CompletedAction[]): CompensationPlan {
  const plan: CompensationPlan = { steps: [], manual: [] };
  for (const action of [...actions].reverse()) {
    if (action.reversibility === "pure") continue;
    if (action.reversibility === "irreversible") {
      plan.manual.push({
        actionId: action.actionId,
        tool: action.tool,
        reason: "irreversible: needs manual intervention",
      });
    } else if (action.compensation) {
      plan.steps.push({
        actionId: action.actionId,
        tool: action.compensation.tool,
        input: { original: action.input, output: action.output },
      });
    } else {
      plan.manual.push({
        actionId: action.actionId,
        tool: action.tool,
        reason: `${action.reversibility} but declares no compensating action: needs manual intervention`,
      });
    }
  }
  return plan;
}
