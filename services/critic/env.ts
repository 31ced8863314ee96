import type { z } from "zod";
import { PriceEnv } from "../../shared/models/price-config.js";
import { ActorEnv, whole } from "../../shared/runtime/config.js";

/** The critic's environment (docs/configuration.md; the Kubernetes manifests are checked against it). */
export const CriticEnv = ActorEnv.extend({
  ...PriceEnv.shape,
  CRITIC_MODEL_BREAKER_FAILURES: whole(0, 1_000, 5).describe(
    "How many outages in a row among one model provider's reviews through a critic replica open the provider's breaker, the one the workers share: a provider down for the workers is not asked by the critic either, and the other way round; 0: no breaker.",
  ),
  CRITIC_MODEL_BREAKER_COOLDOWN_MS: whole(100, 3_600_000, 30_000).describe(
    "How long, in milliseconds, an open breaker keeps the critic from its provider before one review tries it, doubled by each failed try up to a minute (or this, when longer).",
  ),
});
export type CriticEnv = z.infer<typeof CriticEnv>;
