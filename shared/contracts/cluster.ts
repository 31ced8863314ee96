import { z } from "zod";
import { ErrorPayload, RunId, SchemaVersion } from "./common.js";
import { Approval, KillSwitch } from "./control.js";
import {
  ApprovalDecidedEvent,
  CallSettlement,
  CancelEvent,
  HaltEvent,
  ResumeEvent,
  ToolCompletedEvent,
} from "./loop-event.js";
import { ModelRef } from "./model.js";
import { PrivacyTier } from "./capability.js";
import { CriticCheck, CriticRequest, CriticVerdict, ReviewUsage } from "./rubric.js";
import { requireConvergence, RunSpec, RunSpecShape } from "./run-spec.js";
import { requireSoundPlan } from "./task-plan.js";

/** Who asked for a child run: the supervisor derives the child's depth and run tree from it. */
export const ParentRef = z.object({
  runId: RunId,
  /** Looked up from the parent's status when absent. */
  rootRunId: RunId.optional(),
  depth: z.number().int().nonnegative(),
});
export type ParentRef = z.infer<typeof ParentRef>;

/** The request on `<prefix>.runs.submit`: a RunSpec, plus the parent envelope for a spawned child. */
export const SubmitRequest = RunSpecShape.extend({ parent: ParentRef.optional() })
  .superRefine(requireConvergence)
  .superRefine(requireSoundPlan);
export type SubmitRequest = z.infer<typeof SubmitRequest>;

/**
 * One message on the work queue (`<prefix>.runs.queue.<runId>`): start a run, or continue one
 * with an outside event (an approval decision, a halt, a resume). The run's state itself lives
 * in its WAL, so any worker can take the job.
 */
export const RunJob = z.object({
  schemaVersion: SchemaVersion,
  runId: RunId,
  rootRunId: RunId,
  parentRunId: RunId.optional(),
  depth: z.number().int().nonnegative(),
  /** Present on the first job of a run; later jobs find the spec in the WAL. */
  spec: RunSpec.optional(),
  /** Audit events the supervisor already published for this run. */
  auditSeq: z.number().int().nonnegative(),
  /**
   * The outside event to continue with: a human's decision, a halt, resume or cancel, or a fan-in's
   * results.
   */
  event: z
    .discriminatedUnion("type", [
      ApprovalDecidedEvent,
      HaltEvent,
      ResumeEvent,
      CancelEvent,
      ToolCompletedEvent,
    ])
    .optional(),
});
export type RunJob = z.infer<typeof RunJob>;

/** The request on `<prefix>.critic.review`: what the critic may see, and the model to judge with. */
export const CriticReviewRequest = z.object({
  schemaVersion: SchemaVersion,
  request: CriticRequest,
  /** The critic model; absent when the critic is checks only. */
  model: ModelRef.optional(),
  /** Deterministic checks the critic runs on the output before (or instead of) the model. */
  checks: z.array(CriticCheck).default([]),
  privacy: PrivacyTier.default("sovereign"),
  /** Reviews of this run before this one: a scripted critic continues from this step. */
  attempt: z.number().int().nonnegative(),
});
export type CriticReviewRequest = z.infer<typeof CriticReviewRequest>;

export const CriticReviewReply = z.discriminatedUnion("ok", [
  z.object({
    schemaVersion: SchemaVersion,
    ok: z.literal(true),
    verdict: CriticVerdict,
    /** The review's model calls (absent: a review by checks only, or a critic of an older build). */
    usage: ReviewUsage.optional(),
  }),
  z.object({ schemaVersion: SchemaVersion, ok: z.literal(false), error: ErrorPayload }),
]);
export type CriticReviewReply = z.infer<typeof CriticReviewReply>;

/** The request on `<prefix>.approvals.<runId>`. */
export const ApprovalRequest = Approval;
export type ApprovalRequest = z.infer<typeof ApprovalRequest>;

/** The request on `<prefix>.control.killswitch`. */
export const KillSwitchRequest = KillSwitch;
export type KillSwitchRequest = z.infer<typeof KillSwitchRequest>;

/**
 * The request on `<prefix>.control.resume`: continue a halted run from where it stopped; with
 * `tree`, every halted run of the tree under it, the deepest first.
 */
export const ResumeRequest = z.object({
  runId: RunId,
  by: z.string().min(1),
  reason: z.string().optional(),
  tree: z.boolean().optional(),
  /**
   * For a run halted for a reconciliation (RECONCILIATION_REQUIRED): what a human found of the
   * call whose outcome was unknown, recorded with its tool service before the run goes on.
   */
  settle: CallSettlement.optional(),
  /**
   * The revision of the run's status its client read (agentctl sends it for one run): a run changed
   * since is refused with RUN_CHANGED, so that a resume, or a copy of it asked again, never resumes
   * a later halt than the one its operator saw.
   */
  revision: z.number().int().positive().optional(),
});
export type ResumeRequest = z.infer<typeof ResumeRequest>;

/**
 * The request on `<prefix>.control.halt`: stop one run now, wherever it is (the kill switch stops
 * them all); with `tree`, every run of the tree under it too. It keeps its place, frees its pool
 * slot, and may resume.
 */
export const HaltRequest = z.object({
  runId: RunId,
  by: z.string().min(1),
  reason: z.string().min(1).max(1_000),
  tree: z.boolean().optional(),
});
export type HaltRequest = z.infer<typeof HaltRequest>;

/**
 * The request on `<prefix>.control.cancel`: end a run for good. It stops where it is (a halt's
 * stop), undoes what can be undone (the compensations of its completed tool calls) and fails with
 * RUN_CANCELLED, which its parent's fan-in carries; with `tree`, every run of the tree under it
 * that has not finished too. Alone, a parent's children still going are cancelled with it (by
 * "agent", its worker, which waits for them to end before it reads which committed; by
 * "supervisor" once it fails, for a parent an earlier build started), and halted ones stay halted.
 * Its fields are a halt's.
 */
export const CancelRequest = HaltRequest;
export type CancelRequest = z.infer<typeof CancelRequest>;

/** The kill switch as stored (one key in the pool bucket, watched by every worker). */
export const KillSwitchState = KillSwitch.extend({ at: z.number().int().nonnegative() });
export type KillSwitchState = z.infer<typeof KillSwitchState>;

/** The reply to control requests (approvals, kill switch, halt, resume, cancel). */
export const ControlReply = z.discriminatedUnion("ok", [
  z.object({
    schemaVersion: SchemaVersion,
    ok: z.literal(true),
    message: z.string(),
    data: z.record(z.string(), z.unknown()).optional(),
  }),
  z.object({ schemaVersion: SchemaVersion, ok: z.literal(false), error: ErrorPayload }),
]);
export type ControlReply = z.infer<typeof ControlReply>;

/**
 * What a live agent worker publishes on `<prefix>.workers.beat.<instance>` every AGENT_BEAT_MS:
 * who it is and the jobs it holds, for `agentctl cluster`'s list of the workers.
 */
export const WorkerBeat = z.object({
  schemaVersion: SchemaVersion,
  workerId: z.string().min(1).max(64),
  /** One process's life: a worker restarted under the same WORKER_ID is a new instance. */
  instance: RunId,
  /** The sender counts as gone after this long without a beat (it says so itself). */
  deadAfterMs: z.number().int().positive().max(600_000),
  /** The ack subjects of the jobs it holds. */
  jobs: z.array(z.string().startsWith("$JS.ACK.")).max(1_000),
  /** On the last beat of a worker that drained: it handed its jobs back. */
  leaving: z.boolean().optional(),
  /**
   * The convergence policies it registers besides the built-in ones: the supervisor admits a run
   * naming one only when every live worker registers it.
   */
  policies: z.array(z.string().min(1).max(64)).max(1_000).optional(),
});
export type WorkerBeat = z.infer<typeof WorkerBeat>;

/**
 * Asked on `<prefix>.workers.holds.<workerId>` by a worker handed a job again whose run that
 * worker wrote last with the same job: whether it still holds the job by another delivery than
 * `except` (it renewed the job late, and drives the run still).
 */
export const HoldsQuery = z.object({
  schemaVersion: SchemaVersion,
  jobSeq: z.number().int().positive(),
  except: z.string().startsWith("$JS.ACK."),
});
export type HoldsQuery = z.infer<typeof HoldsQuery>;

export const HoldsReply = z.object({ schemaVersion: SchemaVersion, held: z.boolean() });
export type HoldsReply = z.infer<typeof HoldsReply>;

/**
 * A supervisor's answer on `<prefix>.control.ping` (every replica answers): who it is, and the
 * settings its admissions apply. Replicas share the pool, and a tree's cap is the one its root was
 * admitted with, so replicas with different settings decide runs differently (agentctl cluster
 * says so).
 */
export const SupervisorHello = z.object({
  schemaVersion: SchemaVersion,
  /** One process's life: its host (a pod's name), its pid and a random suffix. */
  instance: z.string().min(1).max(200),
  startedAt: z.number().int().nonnegative(),
  poolCapacity: z.number().int().positive(),
  maxDepth: z.number().int().nonnegative(),
  treeIterationCap: z.number().int().positive(),
  stallMs: z.number().int().nonnegative(),
});
export type SupervisorHello = z.infer<typeof SupervisorHello>;

/**
 * A critic's answer on `<prefix>.critic.ping` (every replica answers): who it is. Without a critic,
 * every run with one waits at its review (agentctl cluster says so).
 */
export const CriticHello = z.object({
  schemaVersion: SchemaVersion,
  /** One process's life, as SupervisorHello's. */
  instance: z.string().min(1).max(200),
  startedAt: z.number().int().nonnegative(),
});
export type CriticHello = z.infer<typeof CriticHello>;
