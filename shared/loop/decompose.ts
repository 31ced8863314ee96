import type { Draft } from "./draft.js";
import { readySet } from "./plan.js";
import { DEFAULT_MEMORY_LIMIT, type LoopConfig } from "./state.js";

/** DECOMPOSE (the plan's first ready nodes), then RETRIEVE: the agent's memories are recalled. */
export function decompose(d: Draft, config: LoopConfig): void {
  const s = d.state;
  const { spec, plan } = s;
  const maxParallel = spec.task.plan?.maxParallel ?? 1;
  d.enter("DECOMPOSE", undefined, { ready: plan ? readySet(plan, new Set(), new Set(), maxParallel) : [] });
  d.enter("RETRIEVE");
  d.await(
    {
      type: "recallMemory",
      namespace: spec.agent.name,
      query: spec.task.prompt,
      limit: config.memoryLimit ?? DEFAULT_MEMORY_LIMIT,
    },
    { kind: "memory" },
  );
}
