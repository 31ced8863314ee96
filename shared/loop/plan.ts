import { contentHash } from "../runtime/hash.js";

/** A unit of work in a plan; subtasks with no path between them may run in parallel. */
export interface Subtask {
  id: string;
  description: string;
  tools: string[];
  dependsOn: string[];
  estimate: { iterations: number; costUsd: number; durationMs: number };
}

export interface Plan {
  subtasks: Subtask[];
}

export interface PlanBudget {
  maxIterations: number;
  /** 0 = unlimited. */
  maxCostUsd: number;
}

export interface PlanValidation {
  ok: boolean;
  errors: string[];
  estimate: { iterations: number; costUsd: number };
  order: string[];
}

export function planHash(plan: Plan): string {
  return contentHash(plan);
}

/** Kahn's algorithm: a topological order, or the ids left over when a cycle blocks it. */
export function topologicalOrder(plan: Plan): { order: string[]; cyclic: string[] } {
  const indegree = new Map(plan.subtasks.map((s) => [s.id, 0]));
  const dependents = new Map<string, string[]>();
  for (const task of plan.subtasks) {
    for (const dep of task.dependsOn) {
      if (!indegree.has(dep)) continue;
      indegree.set(task.id, (indegree.get(task.id) ?? 0) + 1);
      dependents.set(dep, [...(dependents.get(dep) ?? []), task.id]);
    }
  }
  const queue = [...indegree]
    .filter(([, d]) => d === 0)
    .map(([id]) => id)
    .sort();
  const order: string[] = [];
  while (queue.length > 0) {
    const id = queue.shift() as string;
    order.push(id);
    for (const next of dependents.get(id) ?? []) {
      const d = (indegree.get(next) ?? 0) - 1;
      indegree.set(next, d);
      if (d === 0) queue.push(next);
    }
    queue.sort();
  }
  const cyclic = [...indegree.keys()].filter((id) => !order.includes(id)).sort();
  return { order, cyclic };
}

/** Acyclic, every dependency known, every tool available, the estimate within budget. */
export function validatePlan(
  plan: Plan,
  availableTools: readonly string[],
  budget: PlanBudget,
): PlanValidation {
  const errors: string[] = [];
  const ids = new Set<string>();
  let duplicated = false;
  for (const task of plan.subtasks) {
    if (ids.has(task.id)) errors.push(`duplicate subtask id '${task.id}'`);
    duplicated ||= ids.has(task.id);
    ids.add(task.id);
  }
  if (plan.subtasks.length === 0) errors.push("the plan has no subtasks");
  for (const task of plan.subtasks) {
    for (const dep of task.dependsOn) {
      if (!ids.has(dep)) errors.push(`subtask '${task.id}' depends on unknown subtask '${dep}'`);
    }
    for (const tool of task.tools) {
      if (!availableTools.includes(tool))
        errors.push(`subtask '${task.id}' needs unavailable tool '${tool}'`);
    }
  }
  const { order, cyclic } = topologicalOrder(plan);
  // With two subtasks under one id the order is meaningless: the duplicate is the error to fix first.
  if (cyclic.length > 0 && !duplicated) errors.push(`dependency cycle among: ${cyclic.join(", ")}`);
  const estimate = plan.subtasks.reduce(
    (sum, s) => ({
      iterations: sum.iterations + s.estimate.iterations,
      costUsd: sum.costUsd + s.estimate.costUsd,
    }),
    { iterations: 0, costUsd: 0 },
  );
  if (estimate.iterations > budget.maxIterations) {
    errors.push(`estimated ${estimate.iterations} iterations exceed the budget of ${budget.maxIterations}`);
  }
  if (budget.maxCostUsd > 0 && estimate.costUsd > budget.maxCostUsd) {
    errors.push(`estimated cost $${estimate.costUsd} exceeds the budget of $${budget.maxCostUsd}`);
  }
  return { ok: errors.length === 0, errors, estimate, order };
}

/** Longest remaining duration from each subtask to the end of the plan (itself included). Assumes a DAG. */
export function criticalPath(plan: Plan): Map<string, number> {
  const byId = new Map(plan.subtasks.map((s) => [s.id, s]));
  const dependents = new Map<string, string[]>();
  for (const task of plan.subtasks) {
    for (const dep of task.dependsOn) dependents.set(dep, [...(dependents.get(dep) ?? []), task.id]);
  }
  const memo = new Map<string, number>();
  const length = (id: string): number => {
    const known = memo.get(id);
    if (known !== undefined) return known;
    const own = byId.get(id)?.estimate.durationMs ?? 0;
    const tail = Math.max(0, ...(dependents.get(id) ?? []).map(length));
    memo.set(id, own + tail);
    return own + tail;
  };
  for (const id of byId.keys()) length(id);
  return memo;
}

/**
 * Subtasks whose dependencies are all done and that are not running yet, longest critical path
 * first (ties by id), limited to the free concurrency slots.
 */
export function readySet(
  plan: Plan,
  done: ReadonlySet<string>,
  running: ReadonlySet<string>,
  concurrency: number,
): string[] {
  const slots = Math.max(0, concurrency - running.size);
  const priority = criticalPath(plan);
  return plan.subtasks
    .filter((s) => !done.has(s.id) && !running.has(s.id) && s.dependsOn.every((d) => done.has(d)))
    .map((s) => s.id)
    .sort((a, b) => (priority.get(b) ?? 0) - (priority.get(a) ?? 0) || a.localeCompare(b))
    .slice(0, slots);
}

/** A plan as a RunSpec's `task.plan` states it (see contracts/task-plan.ts). */
export interface PlanSpec {
  nodes: readonly { id: string; prompt: string; dependsOn: readonly string[]; tools?: readonly string[] }[];
}

/**
 * A spec's plan as the loop runs it: each node a subtask with the agent's tools unless it names
 * its own, estimated at one model call (its child's first) and one unit of time, so the critical
 * path is the longest chain of nodes.
 */
export function planOfSpec(spec: PlanSpec, agentTools: readonly string[]): Plan {
  return {
    subtasks: spec.nodes.map((node) => ({
      id: node.id,
      description: node.prompt,
      tools: [...(node.tools ?? agentTools)],
      dependsOn: [...node.dependsOn],
      estimate: { iterations: 1, costUsd: 0, durationMs: 1 },
    })),
  };
}

/** The plan of a single-agent run: the whole task as one subtask. */
export function singleTaskPlan(prompt: string, tools: readonly string[], maxIterations: number): Plan {
  return {
    subtasks: [
      {
        id: "main",
        description: prompt,
        tools: [...tools],
        dependsOn: [],
        estimate: { iterations: Math.min(1, maxIterations), costUsd: 0, durationMs: 0 },
      },
    ],
  };
}
