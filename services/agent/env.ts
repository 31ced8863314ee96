import { hostname } from "node:os";
import { z } from "zod";
import { PriceEnv } from "../../shared/models/price-config.js";
import { ActorEnv, memoryRecallWindow, millis, whole } from "../../shared/runtime/config.js";
import { localToolProblem } from "./local-tools.js";

/** An agent worker's environment (docs/configuration.md; the Kubernetes manifests are checked against it). */
export const AgentEnv = ActorEnv.extend({
  ...PriceEnv.shape,
  WORKER_ID: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,48}$/)
    .default(
      `${hostname()
        .replaceAll(/[^A-Za-z0-9_-]/g, "-")
        .slice(0, 32)}-${process.pid}`,
    )
    .describe("The worker's name in logs, in its beats and in its log messages' ids (1-48 of `A-Za-z0-9_-`).")
    // The default as the docs show it: the one above is this machine's.
    .meta({ default: "<hostname>-<pid>" }),
  // A job renewed too late goes to a second worker, which leaves it to the first when that one
  // says it still holds it (see stillHeldBy).
  AGENT_ACK_WAIT_MS: whole(400, 600_000, 1_200).describe(
    "How long, in milliseconds, a job whose worker stops renewing it (a crash, a lost connection) waits before it goes to another worker; a worker renews each job it holds three times per ack wait, so a run resumes within about this long after its worker dies.",
  ),
  AGENT_BEAT_MS: whole(50, 60_000, 500).describe(
    "How often, in milliseconds, a worker says it is alive, naming the jobs it holds (`agentctl cluster` lists the workers heard).",
  ),
  AGENT_CONCURRENCY: whole(1, 1_000, 8).describe(
    "How many runs one worker drives at once; it pulls jobs up to 8 at a time, never more than it has room for, and the work queue adds no cap of its own across workers.",
  ),
  AGENT_CHECKPOINT_EVERY: whole(1, 10_000, 10).describe(
    "Every how many model responses a worker considers a checkpoint of a run; it writes one once the steps since the last have sealed twice its size, or half its size once the run's context window is full.",
  ),
  AGENT_RETRY_DELAY_MS: millis(5_000).describe(
    "How long, in milliseconds, a job that failed waits before it is offered again; one that failed with an error that is not retryable (`NONDETERMINISM`) waits twice as long at each delivery, up to 5 minutes, until a deploy fixes the cause.",
  ),
  AGENT_ITERATION_LEASE: whole(1, 1_000, 5).describe(
    "The most iterations one reservation adds to its run tree's counter (1, 2, 4… up to this); unspent ones go back when the worker lets the run go, but a killed worker's stay counted, so after faults a tree can stop short of its cap, never pass it.",
  ),
  AGENT_TOOL_DESCRIBE_TTL_MS: whole(0, 3_600_000, 5_000).describe(
    "How long, in milliseconds, a tool's descriptor is reused before its service is asked again (a new tool is found at once); 0: asked at every run lease.",
  ),
  AGENT_TOOL_OUTAGE_MS: whole(0, 86_400_000, 300_000).describe(
    "How long, in milliseconds, a run not yet started waits for a tool whose service takes describes and answers none (hung) before the tool is left out and the run fails as `planInvalid`; a started run goes on with the tool's last descriptor; 0: at the first unanswered describe.",
  ),
  AGENT_SERVICE_WAIT_MS: whole(0, 600_000, 10_000).describe(
    "How long, in milliseconds, a worker waits for a service nobody serves yet (starting, restarting, reconnecting): a tool, the critic, a model actor, the supervisor for child runs; it asks again with backoff, and a tool call's wait counts against neither its retries nor its breaker; 0: no waiting.",
  ),
  AGENT_MODEL_OUTAGE_MS: whole(0, 86_400_000, 300_000).describe(
    "How long, in milliseconds, a run waits out a model provider's outage (rate limited, unavailable, timing out, unreachable), handed back and its turn asked again after `AGENT_RETRY_DELAY_MS` doubling up to a minute, before it fails as `modelError`, or a critic out of reach before the answer goes to repair; 0: at once.",
  ),
  AGENT_MODEL_BREAKER_FAILURES: whole(0, 1_000, 5).describe(
    "How many outages in a row among one model provider's turns through a worker open the provider's breaker, shared by every worker: none asks that provider until the cooldown has passed, then one turn tries it; 0: no breaker.",
  ),
  AGENT_MODEL_BREAKER_COOLDOWN_MS: whole(100, 3_600_000, 30_000).describe(
    "How long, in milliseconds, an open breaker keeps every worker from its provider before one turn tries it, doubled by each failed try up to a minute (or this, when longer); shorter than `AGENT_MODEL_OUTAGE_MS` when both are on, or the worker refuses to start.",
  ),
  AGENT_CHILDREN_END_WAIT_MS: whole(0, 86_400_000, 600_000).describe(
    "How long, in milliseconds, a failing parent waits in all for the children it cancelled to end before it fails without them, naming each one still going for a human; 0: only the first lease's few seconds.",
  ),
  AGENT_CANCEL_SETTLE_WAIT_MS: whole(0, 86_400_000, 300_000).describe(
    "How long, in milliseconds from when a cancel was queued, it waits for the tool service of the call its run halted on to say what the call did, before it leaves the call to a human; 0: at the first unanswered ask.",
  ),
  // Only idempotent ones: the worker refuses to start on another (see localToolProblem).
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
    })
    .describe(
      "The built-in tools a worker runs in-process instead of asking their services, comma-separated: no request and no idempotency record per call, the run's log carries their idempotency. `http_fetch`, `file_read`, `file_list` and `file_write` may be added (the files are then the worker's); `shell` may not (not idempotent); a tool that is not idempotent, or not built in, stops the worker at start; empty: every tool asked of its service.",
    ),
  AGENT_POLICY_MODULES: z
    .string()
    .default("")
    .transform((s) =>
      s
        .split(",")
        .map((m) => m.trim())
        .filter(Boolean),
    )
    .describe(
      "JavaScript modules, comma-separated (paths, relative to the working directory, or `file:` URLs), whose `policies` export (an array of `{ name, evaluate }`) the worker registers at start as convergence policies a RunSpec's `policy` may name; a module that cannot be loaded, or a name built in or given twice, stops the worker at start; empty: none.",
    ),
  AGENT_REDACT_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A YAML or JSON file of redaction rules, read at start: `{ tools: { <tool or *>: { paths?, patterns? } } }`. The tool calls' fields at those paths (`input.<key>…`, `output.<key>…`) and every match of those regular expressions are replaced by `[REDACTED]` before the run's log, its checkpoints or the model see them, on top of the rules tools declare themselves (see docs/redaction.md). A file that cannot be read or parsed stops the worker.",
    ),
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
