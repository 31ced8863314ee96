import type { Phase } from "../contracts/audit.js";
import type { Message, ModelRequest, ToolCall } from "../contracts/model.js";
import type { CriticRequest, CriticVerdict, Defect } from "../contracts/rubric.js";
import type { RunSpec } from "../contracts/run-spec.js";
import type { RunStatusValue, RunUsage } from "../contracts/run-status.js";
import type { ActionPurpose, WalRecord } from "../contracts/wal.js";
import type { AuditEvent } from "../contracts/audit.js";
import type { ToolApproval, ToolDescriptor } from "../contracts/tool.js";
import type { GuardLimits, GuardState } from "./guard.js";
import type { DagProgress } from "./dag-progress.js";
import type { Plan } from "./plan.js";
import type { ConvergencePolicy, RegisteredPolicies, Signal } from "./policy.js";
import type { RepairAttempt } from "./repair.js";
import type { ControllerState } from "./repair-controller.js";
import type { CompensationPlan, CompletedAction } from "./saga.js";
import type { VerifierResult } from "./verifiers.js";

/**
 * What the loop asks its shell to do. Effects run in order; at most one awaits an answer (a tool
 * call may bring the later calls of its batch, run alongside it: see act-batch.ts).
 */
export type Effect =
  | { type: "wal"; record: WalRecord }
  | { type: "audit"; event: AuditEvent }
  | { type: "recallMemory"; namespace: string; query: string; limit: number }
  | { type: "storeMemory"; namespace: string; text: string }
  | { type: "callModel"; requestId: string; request: ModelRequest }
  | ToolCallEffect
  | { type: "critique"; request: CriticRequest }
  | { type: "requestApproval"; reason: string };

export interface ToolCallEffect {
  type: "callTool";
  actionId: string;
  tool: string;
  input: unknown;
  idempotencyKey: string;
  purpose: ActionPurpose;
  timeoutMs: number;
  /** A human's approval the tool asked for (APPROVAL_REQUIRED), sent along with the call. */
  approval?: ToolApproval;
  /**
   * The later calls of its batch (see act-batch.ts), their INTENTs logged with this one's: the
   * shell may run them at the same time as this one, and keeps their outcomes for their turns.
   */
  concurrent?: ToolCallEffect[];
}

export type AwaitingEffect = Extract<
  Effect,
  { type: "recallMemory" | "callModel" | "callTool" | "critique" | "requestApproval" }
>;

/** One answer sample: the answer it proposed and its reply, or null when it proposed tool calls instead. */
export type Sample = { answer: string; message: Extract<Message, { role: "assistant" }> } | null;

export interface Invocation {
  actionId: string;
  tool: string;
  purpose: ActionPurpose;
  inputHash: string;
  ok: boolean | null;
  code?: string;
}

export interface CommitArtifact {
  kind: "commit";
  output: string;
  provenance: Provenance;
  contentHash: string;
}

export interface Provenance {
  runId: string;
  task: string;
  planHash: string | null;
  /** The run's tool calls, the last INVOCATION_LIMIT of them (the audit stream has every one). */
  toolInvocations: Invocation[];
  /** How many calls came before those listed, when some did. */
  toolInvocationsOmitted?: number;
  repairHistory: { strategy: string; diagnosis: string; loopDetected: boolean }[];
  scores: Record<string, number> | null;
  verification: VerifierResult[];
  /** Share of the answer samples that agreed with the committed answer (task.samples > 1). */
  agreement?: number;
  modelId: string | null;
  startedAt: string;
  committedAt: string;
}

export interface FailureReport {
  kind: "failure";
  reason: string;
  diagnosis: string;
  partialOutput: string;
  lastCheckpoint: string | null;
  compensations: { actionId: string; tool: string; ok: boolean; detail?: string }[];
  manualIntervention: { actionId: string; tool: string; reason: string }[];
}

export interface HaltRecord {
  kind: "halt";
  reason: string;
  by: string;
  phase: Phase;
  lastCheckpoint: string | null;
}

export interface Terminal {
  kind: "COMMIT" | "FAIL" | "HALT";
  reason: string;
  output?: string;
  artifact: CommitArtifact | FailureReport | HaltRecord;
  artifactHash: string;
}

export type Pending =
  | { kind: "memory" }
  | { kind: "model"; requestId: string }
  | {
      kind: "tool";
      actionId: string;
      tool: string;
      purpose: ActionPurpose;
      /** The model's tool-call id (ACT calls), pairing the result with the call. */
      callId?: string;
      /** Index into task.verifiers (VERIFY calls). */
      verifierIndex?: number;
      /** The action this one undoes (compensating calls). */
      compensates?: string;
      input: unknown;
    }
  | { kind: "critic" }
  | { kind: "approval"; on: "commit" | "failure" }
  | { kind: "approval"; on: "tool"; call: ApprovalCall };

/** A tool call held for a human's approval: what is made again (with the approval) once granted. */
export interface ApprovalCall {
  tool: string;
  input: unknown;
  callId?: string;
  /** The action the tool refused without approval. */
  actionId: string;
  token: string;
}

/** A running hash of a transcript (see transcript.ts). */
export interface TranscriptDigest {
  /** Messages of the run so far, those the context window left out included. */
  count: number;
  hash: string;
  /** Size of those messages as canonical JSON. */
  bytes: number;
}

export interface LoopState {
  runId: string;
  rootRunId: string;
  parentRunId?: string;
  depth: number;
  spec: RunSpec;
  phase: Phase;
  status: RunStatusValue;
  guard: GuardState;
  limits: GuardLimits;
  system: string;
  messages: Message[];
  plan: Plan | null;
  planHash: string | null;
  /** A spec's `task.plan` under way: which nodes committed, with what, and which run now. */
  dag?: DagProgress;
  /** The current candidate answer. */
  output: string;
  /** Model responses so far. */
  step: number;
  /** Tool calls of the current response still to run. */
  queue: ToolCall[];
  /** Calls of the current batch whose INTENTs are logged, each awaited in its turn (see act-batch.ts). */
  batched?: { effect: ToolCallEffect; pending: Extract<Pending, { kind: "tool" }> }[];
  /** Tool verifiers still to run, by index into task.verifiers. */
  verifyQueue: number[];
  /** The answer samples of the proposal being sampled (task.samples > 1), until the round is complete. */
  sampling?: Sample[];
  pending: Pending | null;
  /** The effect the pending answer belongs to: re-issued on resume. */
  awaiting: AwaitingEffect | null;
  actionCount: number;
  /** The last INVOCATION_LIMIT ACT calls, for the provenance. */
  invocations: Invocation[];
  completed: CompletedAction[];
  /** Whether a spawn whose children committed is a completed action the saga undoes (see StartEvent). */
  undoChildren?: boolean;
  evidence: string[];
  signals: Signal[];
  verification: VerifierResult[] | null;
  verdict: CriticVerdict | null;
  /** Share of the answer samples that agree with the chosen answer (self-consistency); absent with one sample. */
  agreement?: number;
  defects: Defect[];
  repairHistory: RepairAttempt[];
  /** The repair controller's memory; absent until a run with one (see repairControlOf) first repairs. */
  repairControl?: ControllerState;
  /** The step from which the run asks agent.escalationModel instead of agent.model (its repairs stalled). */
  escalatedAtStep?: number;
  compensation: (CompensationPlan & { results: FailureReport["compensations"] }) | null;
  failing: { reason: string; diagnosis: string } | null;
  haltedFrom: { phase: Phase; status: RunStatusValue; pending: Pending | null } | null;
  usage: RunUsage;
  modelId: string | null;
  auditSeq: number;
  /** Critic reviews asked for so far (a scripted critic continues from here). */
  critiques: number;
  transitions: number;
  transitionHash: string;
  /** A running hash of every message of the run (absent in checkpoints written before it existed). */
  transcript?: TranscriptDigest;
  /** How many messages after the first the context window has left out of `messages`. */
  elided?: number;
  /**
   * Bytes of canonical JSON the transitions since the last checkpoint sealed: what a resume from
   * it re-runs and hashes again (see checkpointWorthwhile).
   */
  sealedSinceCheckpoint?: number;
  /** The last checkpoint's state, in bytes of canonical JSON (its record says so; not stored in it). */
  checkpointSize?: number;
  /** Older versions' measures of when to checkpoint, dropped when their checkpoints are restored. */
  checkpointBytes?: number;
  checkpointRetained?: number;
  lastCheckpoint: string | null;
  startedAt: number;
  updatedAt: number;
  terminal: Terminal | null;
}

export interface LoopConfig {
  /** Every tool the runtime can reach; the agent sees those its manifest names. */
  tools: readonly ToolDescriptor[];
  /** The convergence authority; defaults to the one the RunSpec asks for. */
  policy?: ConvergencePolicy;
  /** Policies the worker registers, which a RunSpec's `policy` may name besides the built-in ones. */
  policies?: RegisteredPolicies;
  /** Consider a checkpoint every N model responses (written only once it is worth it). */
  checkpointEvery?: number;
  maxOutputBytes?: number;
  memoryLimit?: number;
}

export interface Transition {
  state: LoopState;
  effects: Effect[];
}

export const DEFAULT_CHECKPOINT_EVERY = 10;
/**
 * The tool calls a run's state (and so its provenance) lists: a long run's state must not grow
 * with every call it ever made, or each checkpoint, and each resume, would cost more than the last.
 */
export const INVOCATION_LIMIT = 100;
export const DEFAULT_MEMORY_LIMIT = 5;
/** The runtime-reserved action a model uses to propose its final answer. */
export const FINISH_TOOL = "finish";
