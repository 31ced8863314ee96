import { SpawnAgentInput, type SpawnAgentOutput } from "../../contracts/control.js";
import type { RunSpec } from "../../contracts/run-spec.js";
import { AgentError } from "../../runtime/errors.js";
import { defineTool } from "../tool.js";

export type SpawnChildren = (
  runs: RunSpec[],
  child: { depth: number; parentRunId: string },
  signal: AbortSignal,
) => Promise<SpawnAgentOutput>;

/**
 * Fans work out to child agents (each at depth + 1) and returns one result per child, in order.
 * A caller already at its granted `maxDepth` gets an error and nothing is spawned.
 */
export function createSpawnTool(spawnChildren: SpawnChildren) {
  return defineTool({
    name: "spawn_agent",
    description: "Runs each given RunSpec as a child agent and returns one result per child, in order.",
    input: SpawnAgentInput,
    capability: { kind: "spawn" },
    reversibility: "pure",
    idempotent: false,
    execute: async (input, ctx) => {
      const maxDepth = ctx.granted.kind === "spawn" ? ctx.granted.maxDepth : 0;
      if (ctx.depth >= maxDepth) {
        throw new AgentError(
          "DEPTH_LIMIT",
          `depth limit reached: depth ${ctx.depth} >= maxDepth ${maxDepth}, no child spawned`,
        );
      }
      return {
        output: await spawnChildren(input.runs, { depth: ctx.depth + 1, parentRunId: ctx.runId }, ctx.signal),
      };
    },
  });
}

/**
 * spawn_agent as a cluster's workers have it: described like any tool, performed by the worker's
 * fan-out (which parks the run) and never run as a tool. What a replay of a run's log needs of it.
 */
export function fanOutSpawnTool() {
  return createSpawnTool(() =>
    Promise.reject(new AgentError("INTERNAL", "spawn_agent is performed by the worker's fan-out")),
  );
}
