import type { KV } from "@nats-io/kv";
import { z } from "zod";
import type { SpawnAgentOutput } from "../contracts/control.js";
import { RunId } from "../contracts/common.js";
import type { RunStatus } from "../contracts/run-status.js";
import { decode, encode } from "./codec.js";
import { RunStatusStore } from "./run-status.js";

/**
 * A parent's open fan-out, kept in `agents-runs` under `fanout.<parentRunId>` (a run waits on at
 * most one tool call at a time): which children its spawn action started. Written before the first
 * child is submitted, so whoever sees the last child settle can find the parent and its action.
 */
export const FanOut = z.object({
  parentRunId: RunId,
  rootRunId: RunId,
  depth: z.number().int().nonnegative(),
  actionId: z.string().min(1),
  children: z.array(RunId).min(1),
});
export type FanOut = z.infer<typeof FanOut>;

/**
 * How a child ends, for its parent: committed or failed. A halted child has not ended: it keeps its
 * place and may be resumed, so its parent waits for how it ends then. A parent that took the halt
 * as the child's result would go on without the work a `resume --tree` then does, and drop the
 * child's later fan-in as stale.
 */
const SETTLED = new Set(["committed", "failed"]);

export function fanOutKey(parentRunId: string): string {
  return `fanout.${parentRunId}`;
}

export { childRunId } from "../loop/saga.js";

export async function writeFanOut(kv: KV, fanOut: FanOut): Promise<void> {
  await kv.put(fanOutKey(fanOut.parentRunId), encode(FanOut, fanOut));
}

export async function readFanOut(kv: KV, parentRunId: string): Promise<FanOut | undefined> {
  const entry = await kv.get(fanOutKey(parentRunId));
  if (!entry || entry.operation !== "PUT") return undefined;
  return decode(FanOut, entry.value);
}

/**
 * Whether a run is the child of `parentRunId`, as its status says. A spawn may name its children's
 * ids (`runId` in a child's spec): one naming a run of another tree, or of another parent, gets
 * that run's status back, and a parent that took it for its child's would read its output, cancel
 * it with its own tree, and undo what it did when it fails.
 */
export function childOf(status: Pick<RunStatus, "parentRunId">, parentRunId: string): boolean {
  return status.parentRunId === parentRunId;
}

/** The fan-in: one result per child, in order, once every child has committed or failed; undefined before that. */
export async function fanInResults(kv: KV, fanOut: FanOut): Promise<SpawnAgentOutput | undefined> {
  const store = new RunStatusStore(kv);
  const statuses: RunStatus[] = [];
  for (const runId of fanOut.children) {
    const status = await store.get(runId);
    if (!status) return undefined;
    if (!childOf(status, fanOut.parentRunId)) {
      statuses.push(notAChild(status, fanOut.parentRunId));
      continue;
    }
    if (!SETTLED.has(status.status)) return undefined;
    statuses.push(status);
  }
  return {
    results: statuses.map((s) => ({
      runId: s.runId,
      status: s.status,
      ...(s.terminal?.output !== undefined ? { output: s.terminal.output } : {}),
      ...(s.status !== "committed" && s.terminal ? { error: errorOf(s.status, s.terminal.reason) } : {}),
    })),
  };
}

/** What a parent is told of a child id that names another's run: refused, and nothing of that run. */
function notAChild(status: RunStatus, parentRunId: string): RunStatus {
  const whose = status.parentRunId ? `a child of ${status.parentRunId}` : "a run of its own tree";
  return {
    ...status,
    status: "failed",
    terminal: {
      kind: "FAIL",
      reason: `[RUN_ID_TAKEN] run ${status.runId} is ${whose}, not a child of ${parentRunId}: a spawned child's runId must name a new run (or leave it out)`,
    },
  };
}

/** A refused child's reason carries its code (`[DEPTH_LIMIT] …`); a child that ran says how it ended. */
function errorOf(status: string, reason: string): { code: string; message: string } {
  const coded = /^\[([A-Z_]+)\] (.*)$/s.exec(reason);
  if (coded) return { code: coded[1] as string, message: coded[2] as string };
  return { code: status.toUpperCase(), message: reason };
}
