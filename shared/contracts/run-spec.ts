import { z } from "zod";
import { Capability, DEFAULT_PRIVACY, PrivacyTier } from "./capability.js";
import { JsonObject, RunId, SchemaVersion } from "./common.js";
import { ModelRef } from "./model.js";
import { CriticCheck, Rubric, Verifier } from "./rubric.js";
import { requireSoundPlan, TaskPlan } from "./task-plan.js";

export const Resources = z.object({
  maxIterations: z.number().int().positive().default(20),
  maxToolCalls: z.number().int().nonnegative().default(50),
  /** 0 = unlimited. */
  maxCostUsd: z.number().nonnegative().default(0),
  /** Absent = unlimited. */
  maxTokensBudget: z.number().int().positive().optional(),
  maxRepairs: z.number().int().nonnegative().default(3),
  deadlineMs: z.number().int().positive().optional(),
  /**
   * The model sees the task and the most recent messages, this many at most (a tool result is
   * never separated from its call). Absent = the whole transcript. It also bounds the state a
   * checkpoint holds, so a long run resumes as fast as a short one.
   */
  maxContextMessages: z.number().int().min(3).optional(),
});
export type Resources = z.infer<typeof Resources>;

export const Task = z.object({
  prompt: z.string().min(1),
  context: JsonObject.optional(),
  rubric: Rubric.optional(),
  verifiers: z.array(Verifier).optional(),
  requiresApproval: z.boolean().optional(),
  /** A DAG of nodes run as child runs (see shared/loop/dag.ts); absent: the agent does the task itself. */
  plan: TaskPlan.optional(),
});
export type Task = z.infer<typeof Task>;

export const AgentManifest = z.object({
  name: z.string().min(1),
  model: ModelRef,
  systemPrompt: z.string().optional(),
  tools: z.array(z.string().min(1)),
  capabilities: z.array(Capability),
  privacy: PrivacyTier.default(DEFAULT_PRIVACY),
  resources: Resources.default(Resources.parse({})),
});
export type AgentManifest = z.infer<typeof AgentManifest>;

/**
 * The independent critic: deterministic checks on the output, a critic model, or both (a failed
 * check caps the verdict whatever the model says).
 */
export const CriticSpec = z
  .object({ model: ModelRef.optional(), rubric: Rubric.optional(), checks: z.array(CriticCheck).optional() })
  .refine((c) => c.model !== undefined || (c.checks?.length ?? 0) > 0, {
    message: "a critic needs a model or at least one check",
  });
export type CriticSpec = z.infer<typeof CriticSpec>;

/**
 * A run request. Convergence is always explicit: a spec with neither verifiers nor a critic
 * has no way to finish and is refused.
 */
export const RunSpecShape = z.object({
  schemaVersion: SchemaVersion,
  runId: RunId.optional(),
  task: Task,
  agent: AgentManifest,
  critic: CriticSpec.optional(),
});

export function requireConvergence(
  spec: { task: { verifiers?: unknown[] | undefined }; critic?: unknown },
  ctx: z.RefinementCtx,
): void {
  if ((spec.task.verifiers?.length ?? 0) === 0 && spec.critic === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["task", "verifiers"],
      message: "no convergence policy: give task.verifiers or a critic",
    });
  }
}

export const RunSpec = RunSpecShape.superRefine(requireConvergence).superRefine(requireSoundPlan);
export type RunSpec = z.infer<typeof RunSpec>;
export type RunSpecInput = z.input<typeof RunSpec>;
