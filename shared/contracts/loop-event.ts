import { z } from "zod";
import { ErrorPayload } from "./common.js";
import { ModelResponse } from "./model.js";
import { RedactionNote } from "./redaction.js";
import { ToolAuditNote } from "./tool.js";
import { CriticVerdict, ReviewUsage } from "./rubric.js";
import { RunSpec } from "./run-spec.js";

/**
 * The inputs of the loop's transition function. Each carries the time it happened (`at`, epoch
 * ms) so the transition stays pure: replaying the same events yields the same states.
 */
const at = z.number().int().nonnegative();

export const StartEvent = z.object({
  type: z.literal("start"),
  at,
  spec: RunSpec,
  runId: z.string(),
  rootRunId: z.string(),
  parentRunId: z.string().optional(),
  depth: z.number().int().nonnegative(),
  /** Audit events already published for this run before it started (the supervisor's `run.admitted`). */
  auditSeq: z.number().int().nonnegative().optional(),
  /**
   * The run's FAIL undoes what its committed children did (see the saga's spawn step). Recorded
   * with the run's start, so a run started by a build before it is replayed as it ran.
   */
  undoChildren: z.boolean().optional(),
});
export const ModelRespondedEvent = z.object({
  type: z.literal("modelResponded"),
  at,
  requestId: z.string(),
  response: ModelResponse,
  /** What the worker redacted from the response's tool calls before anything recorded it. */
  redactions: z.array(RedactionNote).optional(),
});
export const ModelFailedEvent = z.object({
  type: z.literal("modelFailed"),
  at,
  requestId: z.string(),
  error: ErrorPayload,
});
export const ToolCompletedEvent = z.object({
  type: z.literal("toolCompleted"),
  at,
  actionId: z.string(),
  output: z.unknown(),
  signals: z.array(z.string()).optional(),
  audit: z.array(ToolAuditNote).optional(),
  /** What the worker redacted from the output before anything recorded it. */
  redactions: z.array(RedactionNote).optional(),
});
export const ToolAbortedEvent = z.object({
  type: z.literal("toolAborted"),
  at,
  actionId: z.string(),
  error: ErrorPayload,
  /** What the worker redacted from the error's message before anything recorded it. */
  redactions: z.array(RedactionNote).optional(),
});
export const CriticReviewedEvent = z.object({
  type: z.literal("criticReviewed"),
  at,
  verdict: CriticVerdict,
  /** What the review's model used and cost, counted toward the run (absent: none, or not reported). */
  usage: ReviewUsage.optional(),
});
export const CriticFailedEvent = z.object({ type: z.literal("criticFailed"), at, error: ErrorPayload });
export const ApprovalDecidedEvent = z.object({
  type: z.literal("approvalDecided"),
  at,
  decision: z.enum(["approve", "reject", "modify"]),
  by: z.string().min(1),
  reason: z.string().optional(),
  feedback: z.string().optional(),
});
export const MemoryRecalledEvent = z.object({
  type: z.literal("memoryRecalled"),
  at,
  memories: z.array(z.string()),
});
export const HaltEvent = z.object({ type: z.literal("halt"), at, reason: z.string(), by: z.string() });
/**
 * What a human found of the call a run halted on for a reconciliation (RECONCILIATION_REQUIRED): it
 * went through, with this output, or it did not (it runs when the resumed run makes it again).
 */
export const CallSettlement = z.discriminatedUnion("decision", [
  z.object({ decision: z.literal("ran"), output: z.unknown() }),
  z.object({ decision: z.literal("notRun") }),
]);
export type CallSettlement = z.infer<typeof CallSettlement>;
export const ResumeEvent = z.object({
  type: z.literal("resume"),
  at,
  by: z.string(),
  /** The human's settlement of the call the run halted on, written to its tool service first. */
  settle: CallSettlement.optional(),
  /** What the worker redacted from the settlement's output before anything recorded it. */
  redactions: z.array(RedactionNote).optional(),
});
/** An operator ends a halted run for good: it undoes what it can and fails (RUN_CANCELLED). */
/**
 * What the worker cancelling a run learned of the call it halted waiting on, from the call's tool
 * service (see tool-settle.ts): it ran (`completed`, to be undone; `failed`), or it never ran and
 * now never will (`notRun`). Absent when nothing could be learned: the call is left to a human.
 */
export const WaitedOnCall = z.discriminatedUnion("outcome", [
  z.object({ actionId: z.string(), outcome: z.literal("completed"), output: z.unknown() }),
  z.object({ actionId: z.string(), outcome: z.literal("failed"), error: ErrorPayload }),
  z.object({ actionId: z.string(), outcome: z.literal("notRun") }),
]);
export type WaitedOnCall = z.infer<typeof WaitedOnCall>;
export const CancelEvent = z.object({
  type: z.literal("cancel"),
  at,
  reason: z.string(),
  by: z.string(),
  waitedOn: WaitedOnCall.optional(),
  /** What the worker redacted from the waited-on call's output before anything recorded it. */
  redactions: z.array(RedactionNote).optional(),
});
/** The run tree's global iteration budget refused this run another model call (supervisor counters). */
export const GlobalCapEvent = z.object({
  type: z.literal("globalCapReached"),
  at,
  message: z.string(),
  /** Which of the tree's budgets is spent (absent: iterations, as before cost and tokens were counted). */
  budget: z.enum(["iterations", "cost", "tokens"]).optional(),
});
/** A worker took over a run whose previous worker stopped mid-step (crash, drain, lost lease). */
export const RecoveredEvent = z.object({ type: z.literal("recovered"), at, by: z.string() });

export const LoopEvent = z.discriminatedUnion("type", [
  StartEvent,
  ModelRespondedEvent,
  ModelFailedEvent,
  ToolCompletedEvent,
  ToolAbortedEvent,
  CriticReviewedEvent,
  CriticFailedEvent,
  ApprovalDecidedEvent,
  MemoryRecalledEvent,
  HaltEvent,
  ResumeEvent,
  CancelEvent,
  RecoveredEvent,
  GlobalCapEvent,
]);
export type LoopEvent = z.infer<typeof LoopEvent>;
export type StartEvent = z.infer<typeof StartEvent>;
export type ModelRespondedEvent = z.infer<typeof ModelRespondedEvent>;
export type ToolCompletedEvent = z.infer<typeof ToolCompletedEvent>;
export type ToolAbortedEvent = z.infer<typeof ToolAbortedEvent>;
export type ApprovalDecidedEvent = z.infer<typeof ApprovalDecidedEvent>;
export type CancelEvent = z.infer<typeof CancelEvent>;
