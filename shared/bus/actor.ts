import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection, PermissionViolationError } from "@nats-io/transport-node";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { FatalLog } from "../runtime/fatal.js";
import type { ActorEnv } from "../runtime/config.js";
import { startHealthServer, type HealthServer } from "../runtime/health.js";
import type { ActorMetrics } from "../runtime/metrics.js";
import type { Logger } from "../runtime/logger.js";
import type { Random } from "../runtime/random.js";
import { connectBus } from "./connect.js";
import { whenJetStreamAnswers, type JetStreamWait } from "./jetstream-silent.js";
import { JetStreamWatch, jetStreamWatchFor } from "./jetstream-watch.js";
import { deniedByPermissions, linkOf } from "./link.js";
import { busLoginOf, loginText, type BusLogin } from "./login.js";
import { busTlsOf } from "./tls.js";
import { provision, type ProvisionReport } from "./provision.js";
import { DEFAULT_PREFIX, Subjects } from "./subjects.js";

/** What every actor holds once connected: the bus, its streams and buckets, and its clock. */
export interface ActorBus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  subjects: Subjects;
  buckets: {
    runs: KV;
    pool: KV;
    idempotency: KV;
    memory: KV;
    toolState: KV;
    modelBreakers: KV;
    toolDescriptors: KV;
    redactedInputs: KV;
  };
  clock: Clock;
  random: Random;
  logger: Logger;
  /** False while the connection is down (reconnecting) or closed: what `/readyz` reports. */
  connected: () => boolean;
}

/**
 * Connects an actor and makes sure the streams and buckets it needs exist (provisioning is
 * idempotent, so any actor may start first). Server limitations are logged once here.
 */
export async function openActorBus(
  env: ActorEnv,
  name: string,
  options: {
    clock: Clock;
    random: Random;
    logger: Logger;
    onConnectWait?: (error: Error) => void;
    /** Told, instead of a warning, when the server answers and its JetStream does not yet. */
    onJetStreamWait?: (error: Error) => void;
    /**
     * How long to wait for a supervisor to provision what this user may not (agentctl's
     * AGENTCTL_WAIT_MS), told once when it begins; an actor waits for ever (start order does not
     * matter), a command would hang.
     */
    provisionWait?: { waitMs: number; onWait: () => void };
    /** An actor's: a subscription the server refuses stops the process (see refusedSubscription). */
    fatal?: Pick<FatalLog, "fail">;
  },
): Promise<ActorBus> {
  const { fatal, onJetStreamWait, provisionWait, ...deps } = options;
  const login = busLoginOf(env);
  const tls = busTlsOf(env);
  const nc = await connectBus({
    servers: env.NATS_URL.split(","),
    name,
    logger: deps.logger,
    login,
    ...(tls ? { tls } : {}),
    waitMs: env.NATS_CONNECT_WAIT_MS,
    clock: deps.clock,
    ...(deps.onConnectWait ? { onWait: deps.onConnectWait } : {}),
  });
  if (fatal) linkOf(nc).onSubscribeDenied((err) => fatal.fail(refusedSubscription(err, env, login)));
  const subjects = new Subjects(env.AGENTS_PREFIX);
  const jetStreamWait = {
    waitMs: env.NATS_CONNECT_WAIT_MS,
    ...(onJetStreamWait ? { onWait: onJetStreamWait } : {}),
  };
  const waits = { jetStream: jetStreamWait, ...(provisionWait ? { supervisor: provisionWait } : {}) };
  const report = await provisionOrWait(nc, subjects, env.AGENTS_REPLICAS, deps, waits).catch(
    async (err: unknown) => {
      // A connection left open keeps its process alive: agentctl printed its error and hung.
      await nc.close().catch(() => undefined);
      throw err;
    },
  );
  for (const note of report.notes) deps.logger.warn({ serverVersion: report.serverVersion }, note);
  const kvm = new Kvm(nc);
  const names = subjects.buckets();
  const [runs, pool, idempotency, memory, toolState, modelBreakers, toolDescriptors, redactedInputs] =
    await Promise.all([
      kvm.open(names.runs),
      kvm.open(names.pool),
      kvm.open(names.idempotency),
      kvm.open(names.memory),
      kvm.open(names.toolState),
      kvm.open(names.modelBreakers),
      kvm.open(names.toolDescriptors),
      kvm.open(names.redactedInputs),
    ]);
  const js = jetstream(nc);
  return {
    nc,
    connected: () => linkOf(nc).connected(),
    js,
    jsm: await jetstreamManager(nc),
    subjects,
    buckets: { runs, pool, idempotency, memory, toolState, modelBreakers, toolDescriptors, redactedInputs },
    ...deps,
  };
}

/**
 * An actor refused one of its subscriptions can never serve it: left running, it would look healthy
 * and answer nothing (its NATS user's permissions, or an AGENTS_PREFIX they do not cover). Stopped,
 * it says why, and its orchestrator shows it failing.
 */
function refusedSubscription(err: PermissionViolationError, env: ActorEnv, login: BusLogin): AgentError {
  return new AgentError(
    "PERMISSION_DENIED",
    `the NATS server refused this actor's subscription to '${err.subject}' (${login.kind === "password" ? `NATS user ${login.user}` : loginText(login)}, AGENTS_PREFIX '${env.AGENTS_PREFIX}'): give the user that subject (the shipped permissions grant the default prefix '${DEFAULT_PREFIX}' only)`,
    { cause: err },
  );
}

/**
 * Runs `stop` once on SIGTERM or SIGINT, then exits; a second signal exits at once, and so does a
 * stop that takes longer than `graceMs`. `stop` should finish or hand back work in progress and
 * drain the connection.
 */
export function onShutdown(logger: Logger, stop: (signal: string) => Promise<void>, graceMs = 15_000): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, "stopping");
    // A drain that cannot finish (the server is gone and reconnects never give up) must not keep
    // the process alive: the orchestrator's kill would come anyway, without a log line.
    setTimeout(() => {
      logger.error({ graceMs }, "could not stop in time: exiting");
      process.exit(1);
    }, graceMs).unref();
    stop(signal).then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, "error while stopping");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
}

/**
 * Provisions, or, for an actor whose NATS user may not create streams (every one but the supervisor
 * under the shipped permissions), waits until the supervisor has: start order does not matter.
 * A server whose JetStream does not answer is waited for like a server that does not answer at all
 * (NATS_CONNECT_WAIT_MS, see whenJetStreamAnswers): an actor that exited on it ("timeout",
 * INTERNAL) is restarted by its orchestrator after a growing delay (up to five minutes in
 * Kubernetes), which it may still be waiting out long after the JetStream cluster has its quorum.
 */
async function provisionOrWait(
  nc: NatsConnection,
  subjects: Subjects,
  replicas: number,
  deps: { clock: Clock; logger: Logger },
  waits: { jetStream: JetStreamWait; supervisor?: { waitMs: number; onWait: () => void } },
): Promise<ProvisionReport> {
  const { supervisor } = waits;
  const started = deps.clock.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await whenJetStreamAnswers(
        "provisioning the streams and buckets",
        { ...deps, nc },
        () => provision(nc, { subjects, replicas }),
        waits.jetStream,
      );
    } catch (err) {
      const off = noJetStream(err, nc.getServer());
      if (off) throw off;
      if (!deniedByPermissions(err)) throw err;
      const missing = `streams or buckets missing, with fewer replicas than AGENTS_REPLICAS (${replicas}) or without settings this build needs (a supervisor of an older build provisioned them), and this user may not create or change them`;
      const awaited = `a supervisor under AGENTS_PREFIX '${subjects.prefix}' with the same AGENTS_REPLICAS`;
      if (supervisor && deps.clock.now() - started >= supervisor.waitMs)
        throw new AgentError(
          "BUS_UNAVAILABLE",
          `${missing}; no supervisor provisioned them within ${supervisor.waitMs} ms: start ${awaited}`,
          { cause: err },
        );
      if (supervisor) {
        if (attempt === 0) supervisor.onWait();
      } else if (attempt % 10 === 0) {
        // A supervisor under another prefix, or one whose user may not use this one (it stops
        // with PERMISSION_DENIED), creates none of these: the prefix is what to check first.
        deps.logger.warn(
          { reason: err.message, prefix: subjects.prefix, streams: Object.values(subjects.streams()) },
          `${missing}; waiting for ${awaited} to provision them`,
        );
      }
      await deps.clock.sleep(1_000);
    }
  }
}

/**
 * A server without JetStream, or a user whose account has none: every stream and bucket lives
 * there, so nothing can work, and the client's own words ("jetstream is not enabled", INTERNAL for
 * agentctl) did not say what to change.
 */
function noJetStream(err: unknown, server: string): AgentError | undefined {
  // The client's own class (not exported by name) for both: "jetstream is not enabled" (no server
  // answers the JetStream API) and "JetStream not enabled for account" (JetStream's error 10039).
  if (!(err instanceof Error) || err.name !== "JetStreamNotEnabled") return undefined;
  return new AgentError(
    "BUS_UNAVAILABLE",
    `the NATS server at ${server} has no JetStream for this connection (${err.message}): start it with -js (or a jetstream {} block in its configuration), or enable JetStream for the NATS user's account; the runs' logs, audit trail and buckets live there`,
    { cause: err },
  );
}

/** Where an actor serves its health endpoints unless HEALTH_PORT says otherwise. */
const DEFAULT_HEALTH_PORT = 8080;

/**
 * The actor's metrics and its health server (`/healthz`, `/readyz`, `/metrics`). Ready means
 * connected to NATS, its JetStream answering (see JetStreamWatch) and, when given, whatever else
 * the actor needs (`alsoReady`).
 */
export async function startActorHealth(
  bus: ActorBus,
  env: ActorEnv,
  metrics: ActorMetrics,
  alsoReady: () => boolean = () => true,
): Promise<HealthServer> {
  // A manager of its own: a question that times out well before the next one is asked.
  const asking = await jetstreamManager(bus.nc, { timeout: 2_000, checkAPI: false });
  const watch = new JetStreamWatch(
    {
      clock: bus.clock,
      logger: bus.logger,
      ask: () => asking.getAccountInfo(),
      connected: bus.connected,
      gauge: metrics.jetStreamAnswering,
    },
    jetStreamWatchFor(env.JETSTREAM_SILENT_MS),
  );
  const watching = watch.run();
  const server = await startHealthServer({
    port: env.HEALTH_PORT ?? DEFAULT_HEALTH_PORT,
    fallback: env.HEALTH_PORT === undefined,
    host: env.HEALTH_HOST,
    metrics,
    ready: () => bus.connected() && watch.answering() && alsoReady(),
  }).catch(async (err: unknown) => {
    watch.stop();
    await watching;
    throw err;
  });
  if (server.movedFrom !== undefined)
    bus.logger.warn(
      { port: server.port, taken: server.movedFrom },
      `health port ${server.movedFrom} is taken (another actor on this machine?): /healthz, /readyz and /metrics are on ${server.port}; set HEALTH_PORT to choose`,
    );
  return {
    port: server.port,
    close: async () => {
      watch.stop();
      await watching;
      await server.close();
    },
  };
}
