import { z } from "zod";
import { DUPLICATE_WINDOW_MS } from "../../shared/bus/provision.js";
import { ActorEnv } from "../../shared/runtime/config.js";

/** The supervisor's environment (docs/running-a-cluster.md's table; the Kubernetes manifests are checked against it). */
export const SupervisorEnv = ActorEnv.extend({
  SUPERVISOR_POOL_CAPACITY: z.coerce.number().int().min(1).max(100_000).default(16),
  SUPERVISOR_MAX_DEPTH: z.coerce.number().int().min(0).max(16).default(3),
  SUPERVISOR_TREE_ITERATION_CAP: z.coerce.number().int().min(1).max(10_000_000).default(1_000),
  /**
   * An admission stopped midway this long ago is settled (LostAdmissions), from a scan of the held
   * pool slots a few times per period; 0 turns the watchdog off. Longer than any admission.
   */
  SUPERVISOR_STALL_MS: z.coerce.number().int().min(0).max(86_400_000).default(600_000),
  /**
   * A committed or failed run's status is removed this long after it finished, with its tool
   * calls' idempotency records (0 keeps every status for ever). A submit naming the run is then refused.
   */
  SUPERVISOR_STATUS_RETAIN_MS: z.coerce.number().int().min(0).max(315_360_000_000).default(0),
  /**
   * How long the run log keeps a message (0: for ever; at most 10 years); unset leaves the stream as
   * it is. Longer than any run lives: a run's log is also what it resumes from.
   */
  SUPERVISOR_LOG_MAX_AGE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(315_360_000_000)
    // JetStream refuses a max_age shorter than the stream's message-id dedupe window.
    .refine((ms) => ms === 0 || ms >= DUPLICATE_WINDOW_MS, {
      message: `0 (for ever) or at least the run log's dedupe window, ${DUPLICATE_WINDOW_MS} ms`,
    })
    .optional(),
});
export type SupervisorEnv = z.infer<typeof SupervisorEnv>;
