import { z } from "zod";
import { RunId, SchemaVersion } from "./common.js";

export const AUDIT_KINDS = [
  "run.admitted",
  "run.rejected",
  "run.resumed",
  "phase.entered",
  "model.called",
  "model.responded",
  "guard.warn",
  "guard.blocked",
  "guard.circuit_break",
  "tool.denied",
  "tool.intent",
  "tool.completed",
  "tool.aborted",
  "tool.reported",
  "tool.redacted",
  "critic.requested",
  "critic.verdict",
  "repair.started",
  "samples.clustered",
  "repair.stalled",
  "repair.escalated",
  "confidence.assessed",
  "plan.proposed",
  "plan.node.started",
  "plan.node.finished",
  "approval.requested",
  "approval.decided",
  "compensation.started",
  "compensation.completed",
  "memory.recalled",
  "memory.stored",
  "run.committed",
  "run.failed",
  "run.halted",
] as const;
export const AuditKind = z.enum(AUDIT_KINDS);
export type AuditKind = z.infer<typeof AuditKind>;

export const FINAL_AUDIT_KINDS: readonly AuditKind[] = ["run.committed", "run.failed"];

export const AuditActor = z.union([
  z.enum(["supervisor", "agent", "critic", "human"]),
  z.string().regex(/^tool:[A-Za-z0-9_-]+$/),
]);
export type AuditActor = z.infer<typeof AuditActor>;

export const AuditStatus = z.enum(["started", "passed", "failed", "skipped"]);
export type AuditStatus = z.infer<typeof AuditStatus>;

export const Phase = z.enum([
  "PLAN",
  "DECOMPOSE",
  "RETRIEVE",
  "ACT",
  "VERIFY",
  "CRITIQUE",
  "REPAIR",
  "COMMIT",
  "FAIL",
  "HALT",
]);
export type Phase = z.infer<typeof Phase>;
export const TERMINAL_PHASES: readonly Phase[] = ["COMMIT", "FAIL", "HALT"];

export const AuditEvent = z.object({
  schemaVersion: SchemaVersion,
  auditId: z.string().min(1),
  runId: RunId,
  rootRunId: RunId,
  parentRunId: RunId.optional(),
  /** Per run, gapless from 1: a consumer can prove nothing is missing. */
  seq: z.number().int().positive(),
  iteration: z.number().int().nonnegative(),
  phase: Phase,
  kind: AuditKind,
  actor: AuditActor,
  status: AuditStatus,
  reason: z.string().optional(),
  artifacts: z.array(z.string()),
  data: z.record(z.string(), z.unknown()).optional(),
  timestamp: z.iso.datetime({ offset: true }),
});
export type AuditEvent = z.infer<typeof AuditEvent>;
