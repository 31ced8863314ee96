import { z } from "zod";
import { SpawnAgentInput, SpawnAgentOutput } from "../contracts/control.js";
import type { Reversibility, ToolDescriptor } from "../contracts/tool.js";
import { sha256 } from "../runtime/hash.js";

/** The tool a run fans out with; its children's effects are theirs, undone by UNDO_CHILDREN_TOOL. */
export const SPAWN_AGENT_TOOL = "spawn_agent";
/**
 * The compensation of a spawn whose children committed, performed by the worker: each committed
 * child's completed calls are undone (their compensations, most recent first), the latest child first.
 */
export const UNDO_CHILDREN_TOOL = "undo_children";

/**
 * What an `undo_children` call is given: the spawn's children that may have committed, in the order
 * they were spawned (those whose fan-in said so, or, for a run cancelled while it waited on them,
 * every one: the worker undoes those that did).
 */
export const UndoChildrenInput = z.object({ output: z.object({ committed: z.array(z.string()) }) });
export type UndoChildrenInput = z.infer<typeof UndoChildrenInput>;

/** How many hex digits of the parent id's hash stand for the part of it a long child id leaves out. */
const CUT_TAG_DIGITS = 12;

/**
 * A child's runId: derived from the parent, the action and the position, so a retried spawn finds
 * the same children. One that would pass 64 characters (a deep tree, a long id its submitter chose)
 * keeps the parent's first characters and a hash of its whole id: cut alone, two parents sharing
 * their first characters named the same children, and the second's were the first's.
 */
export function childRunId(parentRunId: string, actionId: string, index: number): string {
  const suffix = `-${actionId}-${index + 1}`.replaceAll(/[^A-Za-z0-9_-]/g, "_");
  const whole = `${parentRunId}${suffix}`;
  if (whole.length <= 64) return whole;
  const tag = `_${sha256(parentRunId).slice(0, CUT_TAG_DIGITS)}`;
  return `${parentRunId.slice(0, Math.max(0, 64 - suffix.length - tag.length))}${tag}${suffix}`.slice(-64);
}

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

/**
 * What the saga remembers of a spawn whose fan-in came back: its committed children, whose effects
 * a FAIL of this run undoes (those that failed undid their own). Nothing when none committed, or
 * when the output is not a fan-in's.
 */
export function spawnAction(
  call: { actionId: string; tool: string },
  output: unknown,
): CompletedAction | undefined {
  const parsed = SpawnAgentOutput.safeParse(output);
  if (!parsed.success) return undefined;
  const committed = parsed.data.results.filter((r) => r.status === "committed").map((r) => r.runId);
  if (committed.length === 0) return undefined;
  return undoable(call.actionId, call.tool, committed);
}

/** A spawn as a completed call whose compensation undoes what these children did. */
function undoable(actionId: string, tool: string, committed: string[]): CompletedAction {
  const remembered: UndoChildrenInput["output"] = { committed };
  return {
    actionId,
    tool,
    input: null,
    output: remembered,
    reversibility: "compensable",
    compensation: { tool: UNDO_CHILDREN_TOOL },
  };
}

/**
 * A spawn a run fails while waiting on (a cancel): some of its children may have committed, none
 * told it. Every child is remembered; the worker's undo reads which committed. Nothing when the
 * input is not a spawn's.
 */
export function spawnInFlight(
  call: { actionId: string; tool: string; input: unknown },
  parentRunId: string,
): CompletedAction | undefined {
  const parsed = SpawnAgentInput.safeParse(call.input);
  if (!parsed.success) return undefined;
  const children = parsed.data.runs.map((spec, i) => spec.runId ?? childRunId(parentRunId, call.actionId, i));
  return undoable(call.actionId, call.tool, children);
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
