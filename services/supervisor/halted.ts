import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { parentTakesNoResult } from "../../shared/bus/cancel-job.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { runTree } from "../../shared/bus/run-tree.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { checkAsRead } from "./as-read.js";

/** A halted run as read for an operator's resume: its status and that status's revision. */
export interface HaltedRun {
  status: RunStatus;
  revision: number;
}

/**
 * The run's status and its revision, if the run is halted; NOT_FOUND or INVALID_INPUT otherwise,
 * and RUN_CHANGED when its status is no longer at `revision` (the one its operator's client read).
 */
export async function haltedRun(bus: ActorBus, runId: string, revision?: number): Promise<HaltedRun> {
  const read = await new RunStatusStore(bus.buckets.runs).read(runId);
  if (!read) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  checkAsRead(read, revision, "resuming it");
  if (read.status.status !== "halted") {
    throw new AgentError("INVALID_INPUT", `run '${runId}' is not halted (it is ${read.status.status})`);
  }
  return read;
}

/**
 * A halted child whose parent can no longer take its result stays halted: resumed, it could commit,
 * and what it did would stand, undone by nobody (the parent's undo does not wait on a halted child:
 * it cannot commit). A cancel undoes its completed calls instead.
 */
export async function checkParentTakesResult(bus: ActorBus, status: RunStatus): Promise<void> {
  const why = await parentNowTakesNoResult(bus, status);
  if (why) {
    throw new AgentError(
      "PARENT_FINISHED",
      `run '${status.runId}' stays halted: ${why}. Nobody would take its result, and what it did would stand: cancel it instead (agentctl cancel ${status.runId}), which undoes its completed calls`,
      { details: { parentRunId: status.parentRunId } },
    );
  }
}

/** parentTakesNoResult, with the parent's status as it is now (one read; none for a root run). */
export async function parentNowTakesNoResult(bus: ActorBus, status: RunStatus): Promise<string | undefined> {
  if (status.parentRunId === undefined) return undefined;
  const parent = await new RunStatusStore(bus.buckets.runs).get(status.parentRunId);
  return parentTakesNoResult(status, parent);
}

/** The halted runs of a tree that may resume, and those left halted (see checkParentTakesResult). */
export interface HaltedTree {
  /** The deepest first, the tree's run itself, if halted, last. */
  runIds: string[];
  leftHalted: { runId: string; why: string }[];
}

/** The halted runs of the tree under `runId`, as the runs bucket holds them now. */
export async function haltedInTree(bus: ActorBus, runId: string): Promise<HaltedTree> {
  const { statuses } = await readRunsBucket(bus);
  const tree = runTree(runId, statuses);
  if (tree.length === 0) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  const halted = tree.filter((s) => s.status === "halted").reverse();
  if (halted.length === 0) throw new AgentError("INVALID_INPUT", `no run of tree '${runId}' is halted`);
  const byId = new Map(statuses.map((s) => [s.runId, s]));
  const found: HaltedTree = { runIds: [], leftHalted: [] };
  for (const status of halted) {
    const parent = status.parentRunId === undefined ? undefined : byId.get(status.parentRunId);
    const why = parentTakesNoResult(status, parent);
    if (why) found.leftHalted.push({ runId: status.runId, why });
    else found.runIds.push(status.runId);
  }
  if (found.runIds.length === 0) {
    throw new AgentError(
      "PARENT_FINISHED",
      `no halted run of tree '${runId}' can resume: ${leftHaltedText(found.leftHalted)}. Cancel them instead: a cancel undoes their completed calls`,
      { details: { leftHalted: found.leftHalted } },
    );
  }
  return found;
}

/** The runs a tree's resume left halted, each with why, for a reply. */
export function leftHaltedText(left: HaltedTree["leftHalted"]): string {
  return left.map(({ runId, why }) => `${runId} (${why})`).join("; ");
}
