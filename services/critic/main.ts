/**
 * The critic actor: `npm run actor -- critic`. Replicas share `<prefix>.critic.review` in one
 * queue group; each review is independent, so the critic holds no state.
 */
import { CriticReviewReply } from "../../shared/contracts/cluster.js";
import { onShutdown, openActorBus } from "../../shared/bus/actor.js";
import { failureReply, serve } from "../../shared/bus/serve.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../shared/runtime/config.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { review } from "./review.js";

const env = parseEnv(ActorEnv, process.env);
const logger = createLogger({ actor: "critic", level: env.LOG_LEVEL });
const bus = await openActorBus(env, "critic", { clock: systemClock, random: systemRandom, logger });
serve(bus.nc, bus.subjects.criticReview(), {
  queue: "critic",
  reply: CriticReviewReply,
  logger,
  handle: async (msg) => {
    const reply = await review(msg.data, { clock: systemClock, random: systemRandom, env: process.env });
    if (reply.ok) logger.info({ passed: reply.verdict.passed, scores: reply.verdict.scores }, "review done");
    return reply;
  },
  onError: failureReply,
});
logger.info("critic ready");
onShutdown(logger, async () => {
  await bus.nc.drain();
});
