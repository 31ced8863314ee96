import { z } from "zod";
import { DUPLICATE_WINDOW_MS } from "../../shared/bus/provision.js";
import { PriceEnv } from "../../shared/models/price-config.js";
import { ActorEnv, whole } from "../../shared/runtime/config.js";

/** The supervisor's environment (docs/configuration.md; the Kubernetes manifests are checked against it). */
export const SupervisorEnv = ActorEnv.extend({
  ...PriceEnv.shape,
  SUPERVISOR_POOL_CAPACITY: whole(1, 100_000, 16).describe(
    "How many runs may be active at once, cluster-wide (runs waiting for approval, their children or an outage count; halted ones do not); past it, admissions are refused with `POOL_FULL`. The runs' ids share one KV value, so the server's `max_payload` bounds it too (at the default 1 MiB, 15,634 runs with 64-character ids), and the supervisor warns at start when it does.",
  ),
  SUPERVISOR_MAX_DEPTH: whole(0, 16, 3).describe(
    "The deepest a run may spawn children: a root run is depth 0, and a deeper child is refused.",
  ),
  SUPERVISOR_TREE_ITERATION_CAP: whole(1, 10_000_000, 1_000).describe(
    "How many model calls a whole run tree may make, written as the tree's cap when its root is admitted; a run of a spent tree circuit-breaks with `GLOBAL_CAP`, and a child of one is refused with it.",
  ),
  SUPERVISOR_WORKER_LISTEN_MS: whole(0, 600_000, 1_000).describe(
    "How long, in milliseconds, after it starts a supervisor listens to the agent workers' beats before it decides a submit naming a registered convergence policy (one no live worker registers is refused with `INVALID_SPEC`); at least one `AGENT_BEAT_MS`.",
  ),
  SUPERVISOR_STALL_MS: whole(0, 86_400_000, 600_000).describe(
    "How long, in milliseconds, an admission stopped midway waits for a submit to finish it: then a run left `queued` with no job fails with `ADMISSION_LOST`, and a pool slot held by a run with no status is freed; 0: never. Longer than any admission.",
  ),
  SUPERVISOR_STATUS_RETAIN_MS: whole(0, 315_360_000_000, 0).describe(
    "How long, in milliseconds, a committed or failed run's status is kept after it finished, then removed with its tool calls' idempotency records, its fan-out record and a root's tree budget; 0: kept for ever. A submit naming a removed run is refused with `RUN_REMOVED`.",
  ),
  SUPERVISOR_LOG_MAX_AGE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(315_360_000_000)
    // JetStream refuses a max_age shorter than the stream's message-id dedupe window.
    .refine((ms) => ms === 0 || ms >= DUPLICATE_WINDOW_MS, {
      message: `0 (for ever) or at least the run log's dedupe window, ${DUPLICATE_WINDOW_MS} ms`,
    })
    .optional()
    .describe(
      `How long, in milliseconds, the run log keeps a message (0: for ever; else at least ${DUPLICATE_WINDOW_MS}, at most 10 years); unset leaves the stream as it is. Set it longer than any run lives, since a run resumes from its log; with \`SUPERVISOR_STATUS_RETAIN_MS\` set, it must be longer than that, or the supervisor refuses to start.`,
    ),
});
export type SupervisorEnv = z.infer<typeof SupervisorEnv>;
