import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { SubmitReply, type SpawnAgentOutput } from "../../shared/contracts/control.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { requestJson } from "../../shared/bus/request.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { SpawnChildren } from "../../shared/tools/builtin/spawn.js";

const SETTLED = new Set(["committed", "failed", "halted"]);

/** A child's runId: derived from the parent and position, so a retried spawn finds the same children. */
export function childRunId(parentRunId: string, index: number): string {
  const suffix = `-c${index + 1}`;
  return `${parentRunId.slice(0, 64 - suffix.length)}${suffix}`;
}

/**
 * Fan-out through the supervisor (each child is admitted like any run: pool, depth, kill switch)
 * and fan-in by watching each child's status until it settles: one result per child, in order.
 */
export function spawnThroughSupervisor(bus: ActorBus): SpawnChildren {
  const status = new RunStatusStore(bus.buckets.runs);
  return async (runs, child, signal) => {
    const results = await Promise.all(
      runs.map(async (spec, i): Promise<SpawnAgentOutput["results"][number]> => {
        const runId = spec.runId ?? childRunId(child.parentRunId, i);
        const reply = await requestJson(
          bus.nc,
          bus.subjects.runsSubmit(),
          {
            schema: SubmitRequest,
            value: { ...spec, runId, parent: { runId: child.parentRunId, depth: child.depth - 1 } },
          },
          SubmitReply,
          { timeoutMs: 10_000, unavailable: "TOOL_UNAVAILABLE" },
        );
        if (!reply.ok) {
          return {
            runId,
            status: "rejected",
            error: { code: reply.error.code, message: reply.error.message },
          };
        }
        const settled = await settle(status, runId, signal);
        return {
          runId,
          status: settled.status,
          ...(settled.terminal?.output !== undefined ? { output: settled.terminal.output } : {}),
          ...(settled.status !== "committed" && settled.terminal
            ? { error: { code: settled.status.toUpperCase(), message: settled.terminal.reason } }
            : {}),
        };
      }),
    );
    return { results };
  };
}

async function settle(store: RunStatusStore, runId: string, signal: AbortSignal): Promise<RunStatus> {
  for await (const status of store.watch(runId, signal)) if (SETTLED.has(status.status)) return status;
  throw new Error(`stopped waiting for child run ${runId}`);
}
