/**
 * The supervisor actor: `npm run actor -- supervisor`. Stateless: admission decisions, the kill
 * switch and approvals live in JetStream KV, so any number of replicas can run side by side.
 */
import type { Msg } from "@nats-io/transport-node";
import { ControlReply } from "../../shared/contracts/cluster.js";
import { SubmitReply } from "../../shared/contracts/control.js";
import { onShutdown, openActorBus, startActorHealth } from "../../shared/bus/actor.js";
import { failureReply, serve, type Served } from "../../shared/bus/serve.js";
import { ledgerLimit, ledgerRoom, PoolLedger } from "../../shared/bus/pool.js";
import { setLogMaxAge } from "../../shared/bus/provision.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { loadPriceTable } from "../../shared/models/price-config.js";
import { parseEnv } from "../../shared/runtime/config.js";
import { RUN_ID_MAX_LENGTH, uuidIds } from "../../shared/runtime/ids.js";
import { instanceName } from "../../shared/runtime/instance.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { startTracing } from "../../shared/runtime/tracing-sdk.js";
import { exitOnFatal } from "../../shared/runtime/fatal.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { Admission } from "./admission.js";
import { SupervisorEnv } from "./env.js";
import { LostAdmissions } from "./lost-admissions.js";
import { logOutlivesStatuses, sweepFinishedRuns } from "./retention.js";
import { watchSlots } from "./slot-scan.js";
import { controlFailure } from "./control-failure.js";
import { decideApproval } from "./approval.js";
import { releaseSlots, setKillSwitch } from "./control.js";
import { cancelRun } from "./cancel.js";
import { haltRun } from "./halt.js";
import { resumeRun } from "./resume.js";
import { registerStoreGauges } from "./store-gauges.js";
import { answerRollCall, helloOf } from "./roll-call.js";
import { WorkerPolicies } from "./worker-policies.js";

const fatal = exitOnFatal(createLogger({ actor: "supervisor" }));
const env = parseEnv(SupervisorEnv, process.env);
const prices = loadPriceTable(env);
const logger = createLogger({ actor: "supervisor", level: env.LOG_LEVEL });
fatal.use(logger);
const tracing = await startTracing(env, "supervisor", logger);
const bus = await openActorBus(env, "supervisor", {
  clock: systemClock,
  random: systemRandom,
  logger,
  fatal,
});
const metrics = new ActorMetrics("supervisor");
if (env.SUPERVISOR_LOG_MAX_AGE_MS !== undefined) {
  const changed = await setLogMaxAge(bus.nc, bus.subjects, env.SUPERVISOR_LOG_MAX_AGE_MS);
  if (changed) logger.warn({ maxAgeMs: env.SUPERVISOR_LOG_MAX_AGE_MS }, "run log's max_age set");
}
if (env.SUPERVISOR_STATUS_RETAIN_MS > 0) {
  // What the stream keeps, whoever set it: an earlier SUPERVISOR_LOG_MAX_AGE_MS stays on it.
  const { config } = await bus.jsm.streams.info(bus.subjects.streams().log);
  const refused = logOutlivesStatuses(config.max_age, env.SUPERVISOR_STATUS_RETAIN_MS);
  if (refused) throw refused;
}
// The pool's ledger is one KV value: past what the server lets a message carry, admissions are
// refused (POOL_FULL) before the configured capacity. Said once here rather than at run 15,000.
const ledgerMaxBytes = ledgerLimit(bus.nc.info?.max_payload);
const ledgerHolds = ledgerRoom(ledgerMaxBytes, RUN_ID_MAX_LENGTH);
if (env.SUPERVISOR_POOL_CAPACITY > ledgerHolds) {
  logger.warn(
    {
      poolCapacity: env.SUPERVISOR_POOL_CAPACITY,
      maxPayload: bus.nc.info?.max_payload,
      runsWithLongestIds: ledgerHolds,
      runsWithGeneratedIds: ledgerRoom(ledgerMaxBytes, uuidIds.next("run").length),
    },
    "SUPERVISOR_POOL_CAPACITY is more than the pool ledger can hold within the server's max_payload: admissions past what it holds are refused with POOL_FULL; raise max_payload to use the whole capacity",
  );
}
// One ledger for admissions, resumes and releases alike: changes queued together share a write.
const pool = PoolLedger.of(bus);
const workerPolicies = new WorkerPolicies(bus.nc, bus.subjects, bus.clock, env.SUPERVISOR_WORKER_LISTEN_MS);
workerPolicies.start();
const admission = new Admission(
  bus,
  pool,
  {
    poolCapacity: env.SUPERVISOR_POOL_CAPACITY,
    maxDepth: env.SUPERVISOR_MAX_DEPTH,
    treeIterationCap: env.SUPERVISOR_TREE_ITERATION_CAP,
    prices,
  },
  uuidIds,
  metrics,
  workerPolicies,
);
const onFailure = (subject: string): void => metrics.badRequests.inc({ subject });
const subjects = bus.subjects;
const queue = "supervisor";
// Stopped before the connection drains: a request taken is answered, not refused (see Served.stop).
const served: Served[] = [];
served.push(
  serve(bus.nc, subjects.runsSubmit(), {
    queue,
    reply: SubmitReply,
    logger,
    handle: (msg) => admission.submit(msg.data),
    onError: failureReply,
    onFailure,
  }),
);
// Operator controls share one reply contract: approvals, halt, resume, cancel, kill switch.
const controls: [string, (msg: Msg) => Promise<ControlReply>][] = [
  [subjects.approvalsAll(), (msg) => decideApproval(bus, msg.subject, msg.data)],
  [subjects.halt(), (msg) => haltRun(bus, msg.data)],
  [subjects.resume(), (msg) => resumeRun(bus, pool, env.SUPERVISOR_POOL_CAPACITY, msg.data)],
  [subjects.cancel(), (msg) => cancelRun(bus, msg.data)],
  [subjects.killSwitch(), (msg) => setKillSwitch(bus, msg.data)],
];
for (const [subject, handle] of controls) {
  served.push(
    serve(bus.nc, subject, {
      queue,
      reply: ControlReply,
      logger,
      handle,
      onError: controlFailure,
      onFailure,
    }),
  );
}
const stopping = new AbortController();
const released = releaseSlots(bus, pool, stopping.signal, metrics.orphansCancelled).catch((err: unknown) => {
  logger.fatal({ err }, "pool release loop stopped");
  process.exit(1);
});
const watchdog =
  env.SUPERVISOR_STALL_MS > 0
    ? watchSlots(
        bus,
        env.SUPERVISOR_STALL_MS,
        {
          holding: metrics.runsHoldingSlot,
          lost: new LostAdmissions(bus, pool, env.SUPERVISOR_STALL_MS, metrics.lostAdmissions),
        },
        stopping.signal,
      )
    : Promise.resolve();
const retention =
  env.SUPERVISOR_STATUS_RETAIN_MS > 0
    ? sweepFinishedRuns(
        bus,
        { retainMs: env.SUPERVISOR_STATUS_RETAIN_MS },
        {
          toolRecords: metrics.toolRecordsRemoved,
          statuses: metrics.statusesRemoved,
          treeBudgets: metrics.treeBudgetsRemoved,
        },
        stopping.signal,
      ).catch((err: unknown) => {
        logger.fatal({ err }, "retention loop stopped");
        process.exit(1);
      })
    : Promise.resolve();
await registerStoreGauges(bus, metrics.registry);
const health = await startActorHealth(bus, env, metrics);
// Last: a supervisor that answers the roll call serves everything else already.
const instance = instanceName(systemRandom);
await answerRollCall(bus.nc, subjects, helloOf(instance, systemClock.now(), env));
logger.info(
  {
    instance,
    healthPort: health.port,
    poolCapacity: env.SUPERVISOR_POOL_CAPACITY,
    maxDepth: env.SUPERVISOR_MAX_DEPTH,
    treeIterationCap: env.SUPERVISOR_TREE_ITERATION_CAP,
    stallMs: env.SUPERVISOR_STALL_MS,
    statusRetainMs: env.SUPERVISOR_STATUS_RETAIN_MS,
  },
  "supervisor ready",
);
onShutdown(logger, async () => {
  stopping.abort();
  workerPolicies.stop();
  await health.close();
  await Promise.all(served.map((endpoint) => endpoint.stop()));
  await bus.nc.drain();
  await released;
  await watchdog;
  await retention;
  await tracing.shutdown();
});
