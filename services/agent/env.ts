import { hostname } from "node:os";
import { z } from "zod";
import { ActorEnv, memoryRecallWindow, millis } from "../../shared/runtime/config.js";
import { localToolProblem } from "./local-tools.js";

/** An agent worker's environment (docs/running-a-cluster.md's table; the Kubernetes manifests are checked against it). */
export const AgentEnv = ActorEnv.extend({
  WORKER_ID: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,48}$/)
    .default(
      `${hostname()
        .replaceAll(/[^A-Za-z0-9_-]/g, "-")
        .slice(0, 32)}-${process.pid}`,
    ),
  /**
   * A job whose worker stops renewing it (a crash, a lost connection) goes to another worker after
   * this; a worker renews each job it holds three times per ack wait. Short, so a run resumes within
   * about this long after its worker dies. A job renewed too late goes to a second worker, which
   * leaves it to the first when that one says it still holds it (see stillHeldBy).
   */
  AGENT_ACK_WAIT_MS: z.coerce.number().int().min(400).max(600_000).default(1_200),
  /** How often a worker says it is alive, naming the jobs it holds (agentctl cluster lists the workers heard). */
  AGENT_BEAT_MS: z.coerce.number().int().min(50).max(60_000).default(500),
  AGENT_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(8),
  AGENT_CHECKPOINT_EVERY: z.coerce.number().int().min(1).max(10_000).default(10),
  AGENT_RETRY_DELAY_MS: millis(5_000),
  /** Most iterations one reservation adds to its tree's counter (1, 2, 4… up to this); unspent ones go back. */
  AGENT_ITERATION_LEASE: z.coerce.number().int().min(1).max(1_000).default(5),
  /** How long a tool's descriptor is reused before its service is asked again (0: every run lease). */
  AGENT_TOOL_DESCRIBE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(5_000),
  /** How long a run not yet started waits for a tool whose service takes describes and answers none (hung), as a worker saw it, before the tool is left out and the run fails as planInvalid (0: at the first unanswered describe). */
  AGENT_TOOL_OUTAGE_MS: z.coerce.number().int().min(0).max(86_400_000).default(300_000),
  /** How long a worker waits for a service nobody serves yet: a tool, the critic, a model actor, the supervisor (0: not at all). */
  AGENT_SERVICE_WAIT_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  /** How long a run waits out a model provider's outage, handed back and asked again, before it fails (0: at once). */
  AGENT_MODEL_OUTAGE_MS: z.coerce.number().int().min(0).max(86_400_000).default(300_000),
  /** Outages in a row among one model provider's calls through a worker that open the provider's breaker, shared by every worker (0: no breaker). */
  AGENT_MODEL_BREAKER_FAILURES: z.coerce.number().int().min(0).max(1_000).default(5),
  /** How long an open breaker keeps every worker from calling its provider before one call tries it (doubled by each failed try, up to a minute or this). */
  AGENT_MODEL_BREAKER_COOLDOWN_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  /** How long a failing parent waits in all for the children it cancelled to end (handed back and asked again) before it fails without them, naming each for a human. */
  AGENT_CHILDREN_END_WAIT_MS: z.coerce.number().int().min(0).max(86_400_000).default(600_000),
  /** How long a cancel waits for the tool service of the call its run halted on to answer (handed back and asked again) before it leaves the call to a human. */
  AGENT_CANCEL_SETTLE_WAIT_MS: z.coerce.number().int().min(0).max(86_400_000).default(300_000),
  /**
   * The built-in tools a worker runs in-process instead of asking their services (comma list; empty:
   * every tool remote). Only idempotent ones: the worker refuses to start on another (see localToolProblem).
   */
  AGENT_LOCAL_TOOLS: z
    .string()
    .default("echo,memory")
    .transform((s) =>
      s
        .split(",")
        .map((t) => t.trim())
        .filter(Boolean),
    )
    .superRefine((names, ctx) => {
      for (const problem of names.map(localToolProblem))
        if (problem) ctx.addIssue({ code: "custom", message: problem });
    }),
  MEMORY_RECALL_WINDOW: memoryRecallWindow,
})
  // A breaker open longer than runs wait out an outage fails them before its first try, however
  // short the outage.
  .refine(
    (env) =>
      env.AGENT_MODEL_BREAKER_FAILURES === 0 ||
      env.AGENT_MODEL_OUTAGE_MS === 0 ||
      env.AGENT_MODEL_BREAKER_COOLDOWN_MS < env.AGENT_MODEL_OUTAGE_MS,
    {
      message:
        "AGENT_MODEL_BREAKER_COOLDOWN_MS must be shorter than AGENT_MODEL_OUTAGE_MS (or the breaker off, AGENT_MODEL_BREAKER_FAILURES=0): runs would fail before the breaker's first try",
      path: ["AGENT_MODEL_BREAKER_COOLDOWN_MS"],
    },
  );
export type AgentEnv = z.infer<typeof AgentEnv>;
