import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { runTree } from "../../shared/bus/run-tree.js";
import { AgentError } from "../../shared/runtime/errors.js";

/** A halted run as read for an operator's resume: its status and that status's revision. */
export interface HaltedRun {
  status: RunStatus;
  revision: number;
}

/** The run's status and its revision, if the run is halted; NOT_FOUND or INVALID_INPUT otherwise. */
export async function haltedRun(bus: ActorBus, runId: string): Promise<HaltedRun> {
  const read = await new RunStatusStore(bus.buckets.runs).read(runId);
  if (!read) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  if (read.status.status !== "halted") {
    throw new AgentError("INVALID_INPUT", `run '${runId}' is not halted (it is ${read.status.status})`);
  }
  return read;
}

/** The halted runs of the tree under `runId`, the deepest first and the run itself, if halted, last. */
export async function haltedInTree(bus: ActorBus, runId: string): Promise<string[]> {
  const tree = runTree(runId, (await readRunsBucket(bus)).statuses);
  if (tree.length === 0) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  const halted = tree.filter((s) => s.status === "halted").map((s) => s.runId);
  if (halted.length === 0) throw new AgentError("INVALID_INPUT", `no run of tree '${runId}' is halted`);
  return halted.reverse();
}
