import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { DEFAULT_PREFIX } from "../../shared/bus/subjects.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../shared/runtime/config.js";
import { AgentError, toAgentError } from "../../shared/runtime/errors.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { randomBytes } from "node:crypto";
import { LocalCluster, NATS_USERS, actorEntry, type ActorLaunch, type ActorProcess } from "./cluster.js";
import { ensureNats, type NatsTarget } from "./ensure-nats.js";

export interface Booted {
  nats: NatsTarget;
  cluster: LocalCluster;
  /** The web console, when started (see BootOptions.console): its URL and its operate token. */
  console?: { url: string; operateToken: string };
  logDir: string;
  stop(): Promise<void>;
}

export interface BootOptions {
  agents?: number;
  env?: Record<string, string>;
  /** More actors to start with the cluster (an example's tool services and model actors). */
  extra?: ActorLaunch[];
  /** The port a local nats-server takes when it is free (see startLocalNats). */
  preferPort?: number;
  /** Start the web console too, on this port when it is free (else a free one). */
  console?: { preferPort: number };
}

/**
 * Boots a local cluster, runs `body` on it and always stops it again. A failure is printed as
 * `CODE: message` on stderr; the result is body's verdict (false on a failure), for the exit code.
 * The actors' logs are removed after a success (each demo left a directory in the system's
 * temporary directory), and kept, saying where, after a failure: they tell what went wrong.
 */
export async function withLocalCluster(
  say: (line: string) => void,
  options: BootOptions,
  body: (booted: Booted) => Promise<boolean>,
): Promise<boolean> {
  let booted: Booted | undefined;
  let ok = false;
  try {
    booted = await bootCluster(say, options);
    ok = await body(booted);
    return ok;
  } catch (err) {
    const error = toAgentError(err);
    process.stderr.write(`${error.code}: ${error.message}\n`);
    return false;
  } finally {
    await booted?.stop();
    if (booted && ok) await rm(booted.logDir, { recursive: true, force: true });
    else if (booted) say(`the actors' logs are kept in ${booted.logDir}`);
  }
}

/**
 * A whole local cluster: NATS (found or started), one supervisor, the tool services, a critic
 * and `agents` workers, each its own OS process, logging to `logDir`.
 */
export async function bootCluster(say: (line: string) => void, options: BootOptions = {}): Promise<Booted> {
  const nats = await ensureNats(say, options.preferPort);
  const prefix = process.env.AGENTS_PREFIX;
  if (nats.useConfUsers && prefix && prefix !== DEFAULT_PREFIX) {
    await nats.stop();
    // Its actors would be refused their subjects, and nothing would serve the demo's run.
    throw new AgentError(
      "INVALID_INPUT",
      `AGENTS_PREFIX '${prefix}': the local nats-server's users (nats.conf, with deploy/k8s/base/nats/permissions.conf) may use the default prefix '${DEFAULT_PREFIX}' only; unset AGENTS_PREFIX, or set NATS_URL to a server of yours`,
    );
  }
  say(`NATS: ${nats.origin}`);
  const logDir = await mkdtemp(join(tmpdir(), "agents-cluster-"));
  const cluster = new LocalCluster({
    natsUrl: nats.url,
    useConfUsers: nats.useConfUsers,
    logDir,
    ...(options.env ? { env: options.env } : {}),
  });
  const stop = async (): Promise<void> => {
    await cluster.stop();
    await nats.stop();
  };
  const booted: Booted = { nats, cluster, logDir, stop };
  try {
    // The supervisor provisions streams and buckets first; the others then start side by side.
    await cluster.start("supervisor");
    const agents = Array.from({ length: options.agents ?? 2 }, (_, i) => `agent-${i + 1}`);
    await Promise.all([
      cluster.start("tools"),
      cluster.start("critic"),
      ...agents.map((name) => cluster.start("agent", name)),
      ...(options.extra ?? []).map((a) => cluster.launch(a)),
    ]);
    if (options.console) booted.console = await startConsole(cluster, options.console.preferPort);
  } catch (err) {
    await stop();
    say(`the actors' logs are kept in ${logDir}`);
    throw err;
  }
  say(`actors: ${[...cluster.actors.keys()].join(", ")} (logs in ${logDir}, removed if all goes well)`);
  return booted;
}

/**
 * The web console on loopback, on `preferPort` when it is free (else a free port), with an operate
 * token made for this cluster: whoever has the URL and the token printed operates it.
 */
async function startConsole(
  cluster: LocalCluster,
  preferPort: number,
): Promise<{ url: string; operateToken: string }> {
  const operateToken = randomBytes(18).toString("base64url");
  const launch = (port: number): Promise<ActorProcess> =>
    cluster.launch({
      entry: actorEntry("console"),
      name: "console",
      user: "console",
      env: { CONSOLE_PORT: String(port), CONSOLE_OPERATE_TOKEN: operateToken },
    });
  const started = await launch(preferPort).catch(() => launch(0));
  return { url: started.url ?? "(see the console's log)", operateToken };
}

/**
 * A client's connection to a booted cluster, as agentctl's user when the cluster runs under
 * nats.conf (otherwise with the credentials in this process's environment).
 */
export function clientBus(booted: Booted, name: string): Promise<ActorBus> {
  const env = parseEnv(ActorEnv, {
    NATS_URL: booted.nats.url,
    // The actors' prefix: they take this process's environment (see LocalCluster).
    AGENTS_PREFIX: process.env.AGENTS_PREFIX,
    LOG_LEVEL: "warn",
    ...(booted.nats.useConfUsers
      ? { NATS_USER: NATS_USERS.cli.user, NATS_PASSWORD: NATS_USERS.cli.password }
      : { NATS_USER: process.env.NATS_USER, NATS_PASSWORD: process.env.NATS_PASSWORD }),
  });
  const logger = createLogger({ actor: "cli", level: "error" });
  return openActorBus(env, name, { clock: systemClock, random: systemRandom, logger });
}
