import { z } from "zod";
import { planOfSpec, validatePlan } from "../loop/plan.js";

/** How many nodes a plan may have: each one is a child run, holding a pool slot while it runs. */
export const MAX_PLAN_NODES = 32;
/** How many of a plan's nodes may run at once, at most. */
export const MAX_PLAN_PARALLEL = 16;

/** A node's id names it in its dependants' `dependsOn`, their prompts and the audit trail. */
export const PlanNodeId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,32}$/, "a node id must match [A-Za-z0-9_-]{1,32}");

export const PlanNode = z.object({
  id: PlanNodeId,
  /** The node's task: the prompt of the child run that does it. */
  prompt: z.string().min(1),
  /** Nodes whose outputs this one needs: it starts once they have committed, their outputs in its prompt. */
  dependsOn: z.array(PlanNodeId).default([]),
  /** The tools the node's child may call, among the agent's; absent: the agent's. */
  tools: z.array(z.string().min(1)).optional(),
});
export type PlanNode = z.infer<typeof PlanNode>;

export const TaskPlan = z
  .object({
    /** The nodes; absent when the agent's model proposes them (`propose`). */
    nodes: z.array(PlanNode).min(1).max(MAX_PLAN_NODES).optional(),
    /** The agent's model proposes the nodes in PLAN, checked as given ones are (see plan-proposal.ts). */
    propose: z.boolean().optional(),
    /** Nodes running at once, at most (1: one after another). */
    maxParallel: z.number().int().min(1).max(MAX_PLAN_PARALLEL).default(1),
    /** A node whose child failed: the run fails (`fail`), or the node runs again, spending a repair (`repair`). */
    onNodeFailure: z.enum(["fail", "repair"]).default("fail"),
  })
  .refine((p) => (p.nodes !== undefined) !== (p.propose === true), {
    message: "give task.plan either nodes, or propose: true for the agent's model to propose them",
  });
export type TaskPlan = z.infer<typeof TaskPlan>;

/**
 * A spec's plan, checked as the run's PLAN phase checks it (see validatePlan): acyclic, every
 * dependency a node of the plan, every node's tools among the agent's, and a node per iteration
 * at most. Refused at submit, naming the problem, rather than failing after admission.
 */
export function requireSoundPlan(
  spec: {
    task: { plan?: TaskPlan | undefined };
    agent: { tools: string[]; resources: { maxIterations: number; maxCostUsd: number } };
  },
  ctx: z.RefinementCtx,
): void {
  const plan = spec.task.plan;
  if (!plan?.nodes) return;
  const { maxIterations, maxCostUsd } = spec.agent.resources;
  const validation = validatePlan(planOfSpec({ nodes: plan.nodes }, spec.agent.tools), spec.agent.tools, {
    maxIterations,
    maxCostUsd,
  });
  for (const error of validation.errors) {
    const fix = error.startsWith("estimated")
      ? " (each node is at least one model call: raise agent.resources.maxIterations, or plan fewer nodes)"
      : "";
    ctx.addIssue({ code: "custom", path: ["task", "plan"], message: `${error}${fix}` });
  }
}
