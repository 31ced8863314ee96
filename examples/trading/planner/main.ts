/**
 * The deterministic trading planner as a model actor on `<prefix>.models.trading-planner`: a tick
 * run names it as its model (`{ provider: "actor", name: "trading-planner" }`) and it answers each
 * turn with the next call of the tick loop. `node dist/examples/trading/planner/main.js`.
 */
import { onShutdown, openActorBus, startActorHealth } from "../../../shared/bus/actor.js";
import { serveModel } from "../../../shared/bus/model-actor.js";
import { systemClock } from "../../../shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../../shared/runtime/config.js";
import { createLogger } from "../../../shared/runtime/logger.js";
import { exitOnFatal } from "../../../shared/runtime/fatal.js";
import { ActorMetrics } from "../../../shared/runtime/metrics.js";
import { systemRandom } from "../../../shared/runtime/random.js";
import { PLANNER_ACTOR } from "./spec.js";
import { nextStep } from "./strategy.js";

const fatal = exitOnFatal(createLogger({ actor: "trading-planner" }));
const env = parseEnv(ActorEnv, process.env);
const logger = createLogger({ actor: "trading-planner", level: env.LOG_LEVEL });
fatal.use(logger);
const bus = await openActorBus(env, "trading-planner", {
  clock: systemClock,
  random: systemRandom,
  logger,
  fatal,
});
const metrics = new ActorMetrics("trading-planner");
serveModel(PLANNER_ACTOR, (request) => Promise.resolve(nextStep(request)), { ...bus, logger });
const health = await startActorHealth(bus, env, metrics);
logger.info({ model: PLANNER_ACTOR, healthPort: health.port }, "trading planner ready");
onShutdown(logger, async () => {
  await health.close();
  await bus.nc.drain();
});
