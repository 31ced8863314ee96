import { CriticReviewRequest, type CriticReviewReply } from "../../shared/contracts/cluster.js";
import { decode } from "../../shared/bus/codec.js";
import { checkingCritic, modelCritic, splitUsage, type Critic } from "../../shared/loop/critic.js";
import { createDriver } from "../../shared/models/factory.js";
import type { ModelDriver } from "../../shared/models/driver.js";
import type { PriceTable } from "../../shared/models/pricing.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import type { Clock } from "../../shared/runtime/clock.js";
import type { Random } from "../../shared/runtime/random.js";

export interface ReviewDeps {
  clock: Clock;
  random: Random;
  env: Readonly<Record<string, string | undefined>>;
  /** Prices of the critic's models (see loadPriceTable): a review's cost counts toward its run. Absent: none. */
  prices?: PriceTable;
  /** Puts the provider's breaker in front of the review's model (see ModelBreakers.guard). */
  guard?: (driver: ModelDriver) => ModelDriver;
}

/**
 * One review: the critic sees the task, the output, the evidence and the rubric (nothing of the
 * generator's conversation), runs the run's deterministic checks, and judges with the model the
 * run names, if any. A scripted critic model
 * continues from the request's `attempt`, so any replica gives the same verdict for the same review.
 */
export async function review(data: Uint8Array, deps: ReviewDeps): Promise<CriticReviewReply> {
  const request = decode(CriticReviewRequest, data);
  let model: Critic | undefined;
  if (request.model) {
    const driver = createDriver(request.model, request.privacy, {
      env: deps.env,
      prices: deps.prices ?? {},
      http: { clock: deps.clock, random: deps.random },
    });
    if (driver instanceof ScriptedDriver) driver.seek(request.attempt);
    model = modelCritic(deps.guard ? deps.guard(driver) : driver);
  }
  const { verdict, usage } = splitUsage(await checkingCritic(request.checks, model)(request.request));
  return { schemaVersion: 1, ok: true, verdict, ...(usage ? { usage } : {}) };
}
