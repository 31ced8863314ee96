import { z } from "zod";

export const RubricDimension = z.object({
  name: z.string().min(1),
  weight: z.number().nonnegative(),
  min: z.number().min(0).max(1),
});
export type RubricDimension = z.infer<typeof RubricDimension>;

export const Rubric = z.object({
  dimensions: z.array(RubricDimension).min(1),
  threshold: z.number().min(0).max(1),
});
export type Rubric = z.infer<typeof Rubric>;

export const DEFAULT_RUBRIC: Rubric = {
  dimensions: [
    { name: "correctness", weight: 0.4, min: 0.8 },
    { name: "completeness", weight: 0.25, min: 0.7 },
    { name: "coherence", weight: 0.2, min: 0.75 },
    { name: "safety", weight: 0.15, min: 0.95 },
  ],
  threshold: 0.8,
};

const NonEmptyCheck = z.object({ kind: z.literal("nonEmpty") });
/** A pattern that does not compile is refused with the spec, not discovered when the run is done. */
function compiles(v: { pattern: string; flags?: string | undefined }): boolean {
  try {
    new RegExp(v.pattern, v.flags);
    return true;
  } catch {
    return false;
  }
}
const RegexCheck = z
  .object({ kind: z.literal("regex"), pattern: z.string().min(1), flags: z.string().optional() })
  .refine(compiles, { message: "not a valid JavaScript regular expression", path: ["pattern"] });
const JsonSchemaCheck = z.object({
  kind: z.literal("jsonSchema"),
  schema: z.record(z.string(), z.unknown()),
});

/** A deterministic check on the output alone (no I/O): what the critic service may run itself. */
export const CriticCheck = z.discriminatedUnion("kind", [NonEmptyCheck, RegexCheck, JsonSchemaCheck]);
export type CriticCheck = z.infer<typeof CriticCheck>;

export const Verifier = z.discriminatedUnion("kind", [
  NonEmptyCheck,
  RegexCheck,
  JsonSchemaCheck,
  z.object({
    kind: z.literal("tool"),
    tool: z.string().min(1),
    input: z.unknown(),
    expect: z.unknown().optional(),
  }),
]);
export type Verifier = z.infer<typeof Verifier>;

/** Root causes a defect can be traced to; the repair strategy follows from them. */
export const RootCause = z.enum([
  "schemaViolation",
  "factualError",
  "logicError",
  "incompleteness",
  "incoherence",
  "safetyViolation",
  "hallucination",
  "retrievalGap",
  "toolFailure",
]);
export type RootCause = z.infer<typeof RootCause>;

export const Severity = z.enum(["low", "medium", "high", "critical"]);
export type Severity = z.infer<typeof Severity>;

export const Defect = z.object({
  dimension: z.string().optional(),
  severity: Severity,
  rootCause: RootCause,
  location: z.string().optional(),
  description: z.string(),
});
export type Defect = z.infer<typeof Defect>;

export const CriticVerdict = z.object({
  scores: z.record(z.string(), z.number().min(0).max(1)),
  defects: z.array(Defect).default([]),
  repairHints: z.array(z.string()).default([]),
  passed: z.boolean(),
});
export type CriticVerdict = z.infer<typeof CriticVerdict>;

/** What a review's model calls used and cost: counted toward the run's budgets and its tree's. */
export const ReviewUsage = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  cachedInputTokens: z.number().int().nonnegative().optional(),
  costUsd: z.number().nonnegative(),
  modelCalls: z.number().int().nonnegative(),
});
export type ReviewUsage = z.infer<typeof ReviewUsage>;

/** What a critic receives: never the generator's messages or reasoning. */
export const CriticRequest = z.object({
  schemaVersion: z.literal(1),
  runId: z.string(),
  task: z.string(),
  output: z.string(),
  evidence: z.array(z.string()),
  rubric: Rubric,
});
export type CriticRequest = z.infer<typeof CriticRequest>;
