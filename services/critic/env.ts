import { z } from "zod";
import { ActorEnv } from "../../shared/runtime/config.js";

/** The critic's environment (docs/running-a-cluster.md's table; the Kubernetes manifests are checked against it). */
export const CriticEnv = ActorEnv.extend({
  /**
   * Outages in a row among one model provider's reviews through a critic replica that open the
   * provider's breaker, the one the workers share (0: no breaker): a provider down for the workers
   * is not asked by the critic either, and the other way round.
   */
  CRITIC_MODEL_BREAKER_FAILURES: z.coerce.number().int().min(0).max(1_000).default(5),
  /** How long an open breaker keeps the critic from asking its provider before one review tries it. */
  CRITIC_MODEL_BREAKER_COOLDOWN_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
});
export type CriticEnv = z.infer<typeof CriticEnv>;
