import { z } from "zod";

export const GuardVerdictKind = z.enum(["allow", "warn", "block", "circuitBreak"]);
export type GuardVerdictKind = z.infer<typeof GuardVerdictKind>;

/** Why a guard spoke; stable, so dashboards and tests can key on them. */
export const GuardReason = z.enum([
  "iterationsNearLimit",
  "maxIterations",
  "maxToolCalls",
  "pingPong",
  "pingPongCycle",
  "truncation",
  "costNearBudget",
  "costBudget",
  "tokensNearBudget",
  "tokenBudget",
  "deadline",
  "maxRepairs",
  "globalCap",
]);
export type GuardReason = z.infer<typeof GuardReason>;

export const GuardVerdict = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("allow") }),
  z.object({ kind: z.enum(["warn", "block", "circuitBreak"]), reason: GuardReason, message: z.string() }),
]);
export type GuardVerdict = z.infer<typeof GuardVerdict>;
