/**
 * The critic actor: `npm run actor -- critic`. Replicas share `<prefix>.critic.review` in one
 * queue group; each review is independent, so the critic holds no state.
 */
import { CriticReviewReply } from "../../shared/contracts/cluster.js";
import { onShutdown, openActorBus, startActorHealth } from "../../shared/bus/actor.js";
import { failureReply, serve } from "../../shared/bus/serve.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../shared/runtime/config.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { exitOnFatal } from "../../shared/runtime/fatal.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { review } from "./review.js";

const fatal = exitOnFatal(createLogger({ actor: "critic" }));
const env = parseEnv(ActorEnv, process.env);
const logger = createLogger({ actor: "critic", level: env.LOG_LEVEL });
fatal.use(logger);
const bus = await openActorBus(env, "critic", { clock: systemClock, random: systemRandom, logger });
const metrics = new ActorMetrics("critic");
serve(bus.nc, bus.subjects.criticReview(), {
  queue: "critic",
  reply: CriticReviewReply,
  logger,
  handle: async (msg) => {
    const timed = metrics.phaseSeconds.startTimer({ phase: "review" });
    const reply = await review(msg.data, { clock: systemClock, random: systemRandom, env: process.env });
    timed();
    if (reply.ok) {
      metrics.criticVerdicts.inc({ passed: String(reply.verdict.passed) });
      logger.info({ passed: reply.verdict.passed, scores: reply.verdict.scores }, "review done");
    }
    return reply;
  },
  onError: failureReply,
  onFailure: (subject) => metrics.badRequests.inc({ subject }),
});
const health = await startActorHealth(bus, env, metrics);
logger.info({ healthPort: health.port }, "critic ready");
onShutdown(logger, async () => {
  await health.close();
  await bus.nc.drain();
});
