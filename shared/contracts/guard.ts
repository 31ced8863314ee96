/**
 * What a guard says of the next step. Plain types, not schemas: a verdict never crosses the wire
 * itself (its audit event carries the message as `reason` and the reason as `data.guardReason`),
 * so nothing parses one.
 */
export type GuardVerdictKind = "allow" | "warn" | "block" | "circuitBreak";

/** Why a guard spoke; stable, so dashboards and tests can key on them. */
export type GuardReason =
  | "iterationsNearLimit"
  | "maxIterations"
  | "maxToolCalls"
  | "pingPong"
  | "pingPongCycle"
  | "truncation"
  | "costNearBudget"
  | "costBudget"
  | "tokensNearBudget"
  | "tokenBudget"
  | "deadline"
  | "maxRepairs"
  | "globalCap"
  | "treeCostBudget"
  | "treeTokenBudget";

export type GuardVerdict =
  { kind: "allow" } | { kind: Exclude<GuardVerdictKind, "allow">; reason: GuardReason; message: string };
