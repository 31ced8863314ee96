/**
 * The trading executor: the eight allowlisted functions of the planner/executor contract as tool
 * services on `<prefix>.tools.<name>` (and `py_<name>`), over a deterministic paper venue. Its
 * state lives in the tool-state bucket. `node dist/examples/trading/executor/main.js`.
 */
import { onShutdown, openActorBus, startActorHealth } from "../../../shared/bus/actor.js";
import { serveToolsOf } from "../../../shared/bus/tool-service.js";
import { systemClock } from "../../../shared/runtime/clock.js";
import { parseEnv } from "../../../shared/runtime/config.js";
import { createLogger } from "../../../shared/runtime/logger.js";
import { exitOnFatal } from "../../../shared/runtime/fatal.js";
import { ActorMetrics } from "../../../shared/runtime/metrics.js";
import { systemRandom } from "../../../shared/runtime/random.js";
import { configHash } from "./config.js";
import { TradingExecutorEnv, loadTradingConfig } from "./env.js";
import { ExecutorStore } from "./store.js";
import { executorTools } from "./tools.js";

const fatal = exitOnFatal(createLogger({ actor: "trading-executor" }));
const env = parseEnv(TradingExecutorEnv, process.env);
const logger = createLogger({ actor: "trading-executor", level: env.LOG_LEVEL });
fatal.use(logger);
const config = loadTradingConfig(env);
const bus = await openActorBus(env, "trading-executor", {
  clock: systemClock,
  random: systemRandom,
  logger,
  fatal,
});
const metrics = new ActorMetrics("trading-executor");
const store = new ExecutorStore(bus.buckets.toolState, config, logger, bus.clock);
await store.read();
const tools = executorTools(store);
const served = serveToolsOf(tools, bus, { logger, metrics });
const health = await startActorHealth(bus, env, metrics);
logger.info(
  {
    tools: tools.length,
    mode: config.mode,
    seed: config.seed,
    configHash: configHash(config),
    healthPort: health.port,
  },
  "trading executor ready",
);
onShutdown(logger, async () => {
  await health.close();
  await served.stop();
  await bus.nc.drain();
});
