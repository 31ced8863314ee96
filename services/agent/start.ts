/**
 * An agent worker process: what `npm run actor -- agent` runs, and what an operator's own entry
 * calls to register convergence policies in code (`policies`) besides those AGENT_POLICY_MODULES
 * names. Configuration comes from the environment (see docs/configuration.md); SIGTERM/SIGINT
 * drain it: no new jobs, current steps finish, jobs go back to the queue at once for another worker.
 */
import { secretFilesOf } from "../../shared/tools/builtin/protected-paths.js";
import { onShutdown, openActorBus, startActorHealth } from "../../shared/bus/actor.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { parseEnv } from "../../shared/runtime/config.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { startTracing } from "../../shared/runtime/tracing-sdk.js";
import { exitOnFatal } from "../../shared/runtime/fatal.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { loadPriceTable } from "../../shared/models/price-config.js";
import { loadRedactionConfig } from "../../shared/tools/redaction-config.js";
import { AgentEnv } from "./env.js";
import { AgentWorker } from "./worker.js";
import { loadPolicyModules } from "../../shared/runtime/policy-modules.js";
import { registerPolicies } from "../../shared/loop/policy-registry.js";
import type { ConvergencePolicy } from "../../shared/loop/policy.js";

export async function startAgentWorker(
  options: { policies?: readonly ConvergencePolicy[] } = {},
): Promise<void> {
  const fatal = exitOnFatal(createLogger({ actor: "agent" }));
  const env = parseEnv(AgentEnv, process.env);
  const prices = loadPriceTable(env);
  const redaction = loadRedactionConfig("AGENT_REDACT_FILE", env.AGENT_REDACT_FILE);
  const logger = createLogger({ actor: "agent", level: env.LOG_LEVEL }).child({ workerId: env.WORKER_ID });
  fatal.use(logger);
  const tracing = await startTracing(env, "agent", logger);
  // Registered before the worker connects: one that cannot register them takes no job.
  const policies = registerPolicies([
    ...(options.policies ?? []),
    ...(await loadPolicyModules(env.AGENT_POLICY_MODULES, process.cwd())),
  ]);
  const bus = await openActorBus(env, `agent-${env.WORKER_ID}`, {
    clock: systemClock,
    random: systemRandom,
    logger,
    fatal,
  });
  const metrics = new ActorMetrics("agent");
  const worker = new AgentWorker(
    bus,
    {
      workerId: env.WORKER_ID,
      ackWaitMs: env.AGENT_ACK_WAIT_MS,
      beatMs: env.AGENT_BEAT_MS,
      concurrency: env.AGENT_CONCURRENCY,
      checkpointEvery: env.AGENT_CHECKPOINT_EVERY,
      retryDelayMs: env.AGENT_RETRY_DELAY_MS,
      iterationLease: env.AGENT_ITERATION_LEASE,
      toolDescribeTtlMs: env.AGENT_TOOL_DESCRIBE_TTL_MS,
      toolOutageMs: env.AGENT_TOOL_OUTAGE_MS,
      serviceWaitMs: env.AGENT_SERVICE_WAIT_MS,
      modelOutageMs: env.AGENT_MODEL_OUTAGE_MS,
      childrenEndWaitMs: env.AGENT_CHILDREN_END_WAIT_MS,
      cancelSettleWaitMs: env.AGENT_CANCEL_SETTLE_WAIT_MS,
      modelBreaker: {
        failures: env.AGENT_MODEL_BREAKER_FAILURES,
        cooldownMs: env.AGENT_MODEL_BREAKER_COOLDOWN_MS,
      },
      localTools: env.AGENT_LOCAL_TOOLS,
      secretFiles: secretFilesOf(env),
      memoryRecallWindow: env.MEMORY_RECALL_WINDOW,
      policies,
      env: process.env,
      prices,
      ...(redaction ? { redaction } : {}),
      metrics,
    },
    uuidIds,
  );
  await worker.start();
  // Not ready while draining: a drained worker takes no new jobs, so the pod leaves the Service.
  const health = await startActorHealth(bus, env, metrics, () => !worker.draining);
  logger.info(
    {
      concurrency: env.AGENT_CONCURRENCY,
      ackWaitMs: env.AGENT_ACK_WAIT_MS,
      localTools: env.AGENT_LOCAL_TOOLS,
      policies: [...policies.keys()],
      healthPort: health.port,
    },
    "agent worker ready",
  );
  onShutdown(logger, async () => {
    await worker.stop();
    await health.close();
    await bus.nc.drain();
    await tracing.shutdown();
  });
}
