import { z } from "zod";

/**
 * One model provider's breaker, as the workers share it in the `<prefix>-model-breakers` bucket
 * (keyed by the provider in base64url; a closed breaker has no key). Readers may watch the bucket:
 * field names are a contract, evolve additively.
 */
export const ModelBreaker = z.object({
  /**
   * The provider: a driver's model and endpoint, with the key's variable when a spec names its own
   * (`openai:gpt-4o@https://…`, `openai:gpt-4o@https://…;key=TEAM_KEY`, `actor:<name>`).
   */
  provider: z.string().min(1),
  /**
   * `open`: no worker calls the provider until `until`; then one call may try it. `probing`: that
   * call is under way, by `by`, and another may try once `until` passes (its worker died, say).
   */
  state: z.enum(["open", "probing"]),
  until: z.number().int().nonnegative(),
  /** When the outage opened it (epoch ms): failed probes keep it. */
  openedAt: z.number().int().nonnegative(),
  /** This opening's wait between tries: doubled by each failed probe, up to a bound. */
  cooldownMs: z.number().int().positive(),
  /** The error that opened it, or failed its last probe (`CODE: message`). */
  reason: z.string(),
  /** The worker that wrote this entry. */
  by: z.string(),
  /** Probes that failed since it opened. */
  failedProbes: z.number().int().nonnegative(),
});
export type ModelBreaker = z.infer<typeof ModelBreaker>;
