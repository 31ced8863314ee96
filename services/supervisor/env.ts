import { z } from "zod";
import { ActorEnv } from "../../shared/runtime/config.js";

/** The supervisor's environment (the README's table; the Kubernetes manifests are checked against it). */
export const SupervisorEnv = ActorEnv.extend({
  SUPERVISOR_POOL_CAPACITY: z.coerce.number().int().min(1).max(100_000).default(16),
  SUPERVISOR_MAX_DEPTH: z.coerce.number().int().min(0).max(16).default(3),
  SUPERVISOR_TREE_ITERATION_CAP: z.coerce.number().int().min(1).max(10_000_000).default(1_000),
  /**
   * A running run unchanged this long gets a fresh job, and an admission stopped midway this long
   * ago is settled (LostAdmissions); 0 turns the watchdog off. Longer than any step or admission.
   */
  SUPERVISOR_STALL_MS: z.coerce.number().int().min(0).max(86_400_000).default(600_000),
  /** A committed or failed run's WAL is removed this long after it finished (0 keeps every WAL for ever). */
  SUPERVISOR_WAL_RETAIN_MS: z.coerce.number().int().min(0).max(31_536_000_000).default(0),
  /**
   * A committed or failed run's status is removed this long after it finished, with its WAL if
   * that is still kept (0 keeps every status for ever). A submit naming the run is then refused.
   */
  SUPERVISOR_STATUS_RETAIN_MS: z.coerce.number().int().min(0).max(315_360_000_000).default(0),
  /** How long the audit stream keeps an event (0: for ever; at most 10 years); unset leaves the stream as it is. */
  SUPERVISOR_AUDIT_MAX_AGE_MS: z.coerce.number().int().min(0).max(315_360_000_000).optional(),
}).superRefine((env, ctx) => {
  // Once a run's status is removed, only its audit trail tells a submit of its id that it ran.
  const auditAge = env.SUPERVISOR_AUDIT_MAX_AGE_MS ?? 0;
  if (env.SUPERVISOR_STATUS_RETAIN_MS > 0 && auditAge > 0 && auditAge <= env.SUPERVISOR_STATUS_RETAIN_MS) {
    ctx.addIssue({
      code: "custom",
      path: ["SUPERVISOR_AUDIT_MAX_AGE_MS"],
      message:
        "must be longer than SUPERVISOR_STATUS_RETAIN_MS: a finished run's id is refused a new run only while its audit trail remembers it",
    });
  }
});
export type SupervisorEnv = z.infer<typeof SupervisorEnv>;
