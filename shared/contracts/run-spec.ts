import { z } from "zod";
import { Capability, DEFAULT_PRIVACY, PrivacyTier } from "./capability.js";
import { JsonObject, RunId, SchemaVersion } from "./common.js";
import { ModelRef } from "./model.js";
import { CriticCheck, Rubric, Verifier } from "./rubric.js";
import { requireSoundPlan, TaskPlan } from "./task-plan.js";

/**
 * The PID repair controller (see shared/loop/repair-controller.ts): its gains set how hard a repair
 * pushes on the distance to the rubric's threshold; a run whose error improves by no more than
 * `noiseFloor` for `stallWindow` repairs in a row has stalled and is escalated.
 */
export const RepairControl = z.object({
  kp: z.number().nonnegative().default(1.5).describe("proportional gain on the current error"),
  ki: z.number().nonnegative().default(0.3).describe("integral gain on the accumulated error"),
  kd: z.number().nonnegative().default(0.5).describe("derivative gain on the error's last change"),
  noiseFloor: z
    .number()
    .min(0)
    .max(1)
    .default(0.02)
    .describe("an error that falls by this much or less is no improvement"),
  stallWindow: z
    .number()
    .int()
    .positive()
    .default(2)
    .describe("repairs in a row without improvement that make a stall"),
});
export type RepairControl = z.infer<typeof RepairControl>;

/**
 * The convergence policy a run asks for: `gates` (verifiers and critic), `verifiers`,
 * `neverConverges`, or one an agent worker registers (see docs/control-policies.md).
 */
export const PolicyName = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_.-]{0,63}$/, "a policy name is 1-64 of A-Za-z0-9_.- starting with a letter");
export type PolicyName = z.infer<typeof PolicyName>;

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
  /** Absent (and no agent.escalationModel): repairs run until maxRepairs, as chosen by the defects. */
  repair: RepairControl.optional(),
});
export type Resources = z.infer<typeof Resources>;

/**
 * When two answer samples agree: the same text, the same text once lower-cased with punctuation
 * and runs of spaces dropped, or the same value of one field of a JSON answer (a dotted path).
 */
export const SampleMatch = z.union([
  z.enum(["exact", "normalized"]),
  z.strictObject({ jsonField: z.string().regex(/^[^.]+(\.[^.]+)*$/) }),
]);
export type SampleMatch = z.infer<typeof SampleMatch>;

/** The most answer samples a run may ask for: past a handful, more samples add cost, not signal. */
export const MAX_SAMPLES = 10;

/**
 * Disposition by confidence: a candidate the policy accepts commits at or above `autoCommitAt`,
 * waits for a human at or above `reviewAt`, and is repaired below it. Absent: gates alone decide.
 */
export const TaskExit = z
  .object({
    autoCommitAt: z.number().min(0).max(1).default(0.95),
    /** Absent: no review band; below autoCommitAt the candidate is repaired. */
    reviewAt: z.number().min(0).max(1).optional(),
  })
  .refine((e) => e.reviewAt === undefined || e.reviewAt <= e.autoCommitAt, {
    message: "reviewAt must not exceed autoCommitAt: lower reviewAt or raise autoCommitAt",
    path: ["reviewAt"],
  });
export type TaskExit = z.infer<typeof TaskExit>;

export const Task = z
  .object({
    prompt: z.string().min(1),
    context: JsonObject.optional(),
    rubric: Rubric.optional(),
    verifiers: z.array(Verifier).optional(),
    requiresApproval: z.boolean().optional(),
    /** Self-consistency: the model is asked this many times per answer (absent: once), the majority wins. */
    samples: z.number().int().min(1).max(MAX_SAMPLES).optional(),
    /** Absent: "exact". */
    sampleMatch: SampleMatch.optional(),
    exit: TaskExit.optional(),
    /** A DAG of nodes run as child runs (see shared/loop/dag.ts); absent: the agent does the task itself. */
    plan: TaskPlan.optional(),
  })
  .superRefine(requireAnswerSchema);
export type Task = z.infer<typeof Task>;

/** A JSON field is read from answers a JSON schema verifier holds to that shape. */
function requireAnswerSchema(
  task: { sampleMatch?: SampleMatch | undefined; verifiers?: { kind: string }[] | undefined },
  ctx: z.RefinementCtx,
): void {
  if (task.sampleMatch === undefined || typeof task.sampleMatch === "string") return;
  if (task.verifiers?.some((v) => v.kind === "jsonSchema")) return;
  ctx.addIssue({
    code: "custom",
    path: ["sampleMatch"],
    message: `sampleMatch.jsonField needs a jsonSchema verifier in task.verifiers, or use "exact" or "normalized"`,
  });
}

export const AgentManifest = z.object({
  name: z.string().min(1),
  model: ModelRef,
  /** The stronger model a run switches to when its repairs stall (see RepairControl). */
  escalationModel: ModelRef.optional(),
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
  policy: PolicyName.optional(),
});

/**
 * Convergence is explicit: `gates` (the default) needs verifiers or a critic, `verifiers` needs
 * verifiers; `neverConverges` and a worker's registered policy need neither (the supervisor checks
 * that a live worker registers the latter).
 */
export function requireConvergence(
  spec: { task: { verifiers?: unknown[] | undefined }; critic?: unknown; policy?: string | undefined },
  ctx: z.RefinementCtx,
): void {
  const verifiers = (spec.task.verifiers?.length ?? 0) > 0;
  const policy = spec.policy ?? "gates";
  if (policy === "gates" && !verifiers && spec.critic === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["task", "verifiers"],
      message:
        'no convergence policy: give task.verifiers or a critic, or name one (policy: "neverConverges" ends only through the bounds)',
    });
  }
  if (policy === "verifiers" && !verifiers) {
    ctx.addIssue({
      code: "custom",
      path: ["task", "verifiers"],
      message: 'policy "verifiers" converges on verifiers only: give task.verifiers, or another policy',
    });
  }
}

export const RunSpec = RunSpecShape.superRefine(requireConvergence).superRefine(requireSoundPlan);
export type RunSpec = z.infer<typeof RunSpec>;
export type RunSpecInput = z.input<typeof RunSpec>;

/** Every model a run may ask, each with the field that names it: its agent's, the one it escalates to, its critic's. */
export function specModels(spec: Pick<RunSpec, "agent" | "critic">): [string, ModelRef][] {
  const { model, escalationModel } = spec.agent;
  return [
    ["agent.model", model],
    ...(escalationModel ? [["agent.escalationModel", escalationModel] as [string, ModelRef]] : []),
    ...(spec.critic?.model ? [["critic.model", spec.critic.model] as [string, ModelRef]] : []),
  ];
}
