import type { ModelBreaker } from "../../shared/contracts/model-breaker.js";
import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import type { KillSwitchView } from "../../shared/bus/kill-switch.js";
import type { ServiceWait } from "../../shared/bus/request.js";
import type { EffectPerformer } from "../../shared/loop/performer.js";
import type { RegisteredPolicies } from "../../shared/loop/policy.js";
import type { AgentError } from "../../shared/runtime/errors.js";
import type { Logger } from "../../shared/runtime/logger.js";
import type { ActorMetrics } from "../../shared/runtime/metrics.js";
import type { FanOutHandler } from "./fanout.js";
import type { RunIterations } from "./leases.js";
import type { Reconciler } from "./reconcile.js";
import type { LeaseRedaction } from "./redaction.js";
import type { RunSpend } from "./spend.js";
import type { RunTrace } from "./run-trace.js";

/**
 * How a lease on a run ended: the job is acked (`done`), handed back (`release`), can never start
 * a run (`unstartable`: no spec and no WAL), or lost to another writer. That writer drives the run
 * with another delivery of this very job (`fenced`: the job is left to it, since nats-server takes
 * an ack or a NAK of any delivery for the job's), or with another job of the run (`superseded`).
 */
export type LeaseOutcome = "done" | "release" | "fenced" | "superseded" | "unstartable";

export interface LeaseDeps {
  bus: ActorBus;
  checkpointEvery: number;
  /** The convergence policies the worker registers (see AgentWorker). */
  policies: RegisteredPolicies;
  /** The named tools' served descriptors (`fresh`: a run not yet started; see ToolCatalog). */
  discover: (names: readonly string[], fresh: boolean) => Promise<ToolDescriptor[]>;
  performer: EffectPerformer;
  /** What the lease keeps out of the run's log (see LeaseRedaction). */
  redaction: LeaseRedaction;
  reconciler: Reconciler;
  /** The iterations this lease reserves of the run tree's budget, and spends on model calls. */
  leases: RunIterations;
  /** The run tree's cost and token budgets: checked before each model call, charged after it and each review. */
  spend?: RunSpend;
  fanOut: FanOutHandler;
  killSwitch: KillSwitchView;
  workerId: string;
  /**
   * Unique per lease: the WAL message ids name it, so a stale writer can never pass as this one.
   * It names the job's stream sequence too (see writer-id.ts).
   */
  writerId: string;
  /** The stream sequence of the job's message on the work queue. */
  jobSeq: number;
  /**
   * Whether the worker whose lease wrote the run last, with another delivery of this job, still
   * holds it (see stillHeldBy).
   */
  heldElsewhere: (writerId: string) => Promise<boolean>;
  /** How many times JetStream has delivered the job, this time included (1: never taken before). */
  deliveryCount: number;
  logger: Logger;
  metrics: ActorMetrics;
  /**
   * Called every `heartbeatMs` while the lease lasts (`working()`): the job's ack wait starts over,
   * and JetStream gives it to another worker only once this worker stops renewing it.
   */
  heartbeat: () => void;
  heartbeatMs: number;
  /** Aborted when the worker drains: the lease hands the run back after the current step. */
  stopping: AbortSignal;
  /** How long the job waits before it is offered again, should the lease fail with `error`. */
  retryDelay: (error: AgentError) => number;
  /** See AGENT_MODEL_OUTAGE_MS: how long a run waits out a model outage before it fails. */
  modelOutageMs: number;
  /** See AGENT_CHILDREN_END_WAIT_MS (absent: CHILDREN_END_WAIT_MS). */
  childrenEndWaitMs?: number;
  /** See AGENT_CANCEL_SETTLE_WAIT_MS (absent: CANCEL_SETTLE_WAIT_MS). */
  cancelSettleWaitMs?: number;
  /** A model provider's breaker as the worker last saw it (undefined: closed, or breakers off). */
  breakerOf: (provider: string) => ModelBreaker | undefined;
  /** How long a call's settling waits for the tool's service when none serves it yet. */
  serviceWait?: (tool: string) => ServiceWait | undefined;
  /** Whether the worker runs a tool in-process (AGENT_LOCAL_TOOLS): no service has its calls. */
  localTool?: (name: string) => boolean;
  /** The lease's spans while tracing is on (see RunTrace). */
  trace?: RunTrace;
}
