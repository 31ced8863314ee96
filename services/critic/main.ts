/**
 * The critic actor: `npm run actor -- critic`. Replicas share `<prefix>.critic.review` in one
 * queue group; each review is independent, so the critic holds no state of its own (a model
 * provider's breaker lives in the bucket the workers share).
 */
import { hostname } from "node:os";
import { CriticHello, CriticReviewReply } from "../../shared/contracts/cluster.js";
import { onShutdown, openActorBus, startActorHealth } from "../../shared/bus/actor.js";
import { whenJetStreamAnswers } from "../../shared/bus/jetstream-silent.js";
import { ModelBreakers } from "../../shared/bus/model-breakers.js";
import { encode } from "../../shared/bus/codec.js";
import { answerRoll } from "../../shared/bus/roll-call.js";
import { failureReply, serve } from "../../shared/bus/serve.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { loadPriceTable } from "../../shared/models/price-config.js";
import { parseEnv } from "../../shared/runtime/config.js";
import { instanceName } from "../../shared/runtime/instance.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { startTracing } from "../../shared/runtime/tracing-sdk.js";
import { servedInSpan } from "../../shared/bus/trace-context.js";
import { exitOnFatal } from "../../shared/runtime/fatal.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { CriticEnv } from "./env.js";
import { review } from "./review.js";

const fatal = exitOnFatal(createLogger({ actor: "critic" }));
const env = parseEnv(CriticEnv, process.env);
const prices = loadPriceTable(env);
const logger = createLogger({ actor: "critic", level: env.LOG_LEVEL });
fatal.use(logger);
const tracing = await startTracing(env, "critic", logger);
const bus = await openActorBus(env, "critic", { clock: systemClock, random: systemRandom, logger, fatal });
const metrics = new ActorMetrics("critic");
const breakers = new ModelBreakers(
  bus.buckets.modelBreakers,
  { failures: env.CRITIC_MODEL_BREAKER_FAILURES, cooldownMs: env.CRITIC_MODEL_BREAKER_COOLDOWN_MS },
  { clock: systemClock, logger, workerId: `critic-${hostname()}-${process.pid}`, metrics },
);
// A watch started as the JetStream cluster elects its leaders is asked again, not the process stopped.
await whenJetStreamAnswers("the model breakers' watch", bus, () => breakers.start());
const guard = breakers.guard.bind(breakers);
const reviews = serve(bus.nc, bus.subjects.criticReview(), {
  queue: "critic",
  reply: CriticReviewReply,
  logger,
  handle: (msg) =>
    servedInSpan(
      "critic.judge",
      msg,
      {},
      () => judge(msg.data),
      (reply) => (reply.ok ? { "critic.passed": reply.verdict.passed } : { "error.type": reply.error.code }),
    ),
  // A breaker's refusal says when its provider is next tried: the run comes back then.
  onError: (err) => failureReply(err, { details: true }),
  onFailure: (subject) => metrics.badRequests.inc({ subject }),
});

async function judge(data: Uint8Array): Promise<CriticReviewReply> {
  const timed = metrics.phaseSeconds.startTimer({ phase: "review" });
  const reply = await review(data, {
    clock: systemClock,
    random: systemRandom,
    env: process.env,
    prices,
    guard,
  });
  timed();
  if (reply.ok) {
    metrics.criticVerdicts.inc({ passed: String(reply.verdict.passed) });
    logger.info({ passed: reply.verdict.passed, scores: reply.verdict.scores }, "review done");
  }
  return reply;
}
const health = await startActorHealth(bus, env, metrics);
// Last: a critic that answers the roll call serves reviews already.
const instance = instanceName(systemRandom);
const hello: CriticHello = { schemaVersion: 1, instance, startedAt: systemClock.now() };
await answerRoll(bus.nc, bus.subjects.criticPing(), encode(CriticHello, hello));
logger.info({ instance, healthPort: health.port }, "critic ready");
onShutdown(logger, async () => {
  await health.close();
  // A review under way (its model asked) is answered before the connection drains.
  await reviews.stop();
  breakers.stop();
  await bus.nc.drain();
  await tracing.shutdown();
});
