import { z } from "zod";
import { ActorEnv } from "../../shared/runtime/config.js";

/** The supervisor's environment (the README's table; the Kubernetes manifests are checked against it). */
export const SupervisorEnv = ActorEnv.extend({
  SUPERVISOR_POOL_CAPACITY: z.coerce.number().int().min(1).max(100_000).default(16),
  SUPERVISOR_MAX_DEPTH: z.coerce.number().int().min(0).max(16).default(3),
  SUPERVISOR_TREE_ITERATION_CAP: z.coerce.number().int().min(1).max(10_000_000).default(1_000),
  /** A running run unchanged this long gets a fresh job (0 turns the watchdog off); longer than any step. */
  SUPERVISOR_STALL_MS: z.coerce.number().int().min(0).max(86_400_000).default(600_000),
});
export type SupervisorEnv = z.infer<typeof SupervisorEnv>;
