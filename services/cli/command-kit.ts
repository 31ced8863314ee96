/** What agentctl's commands share: their connection to the cluster, their output, and a runId's check. */
import { InvalidArgumentError } from "commander";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { jetStreamSilent } from "../../shared/bus/jetstream-silent.js";
import { deniedByPermissions } from "../../shared/bus/link.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv, parseEnv, whole } from "../../shared/runtime/config.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { RUN_ID_PATTERN } from "../../shared/runtime/ids.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { localClusterEnv } from "../local/cluster-file.js";
import { ClusterClient } from "./client.js";

/** One line on stdout: what a command answers. */
export const out = (line: string): void => void process.stdout.write(`${line}\n`);

/** A runId argument or flag: INVALID_INPUT (through commander) unless it is a valid runId. */
export const runIdArg = (value: string): string => {
  if (!RUN_ID_PATTERN.test(value))
    throw new InvalidArgumentError("a runId is 1-64 characters of [A-Za-z0-9_-]");
  return value;
};

/** agentctl's environment: an actor's, and how long a command waits (docs/configuration.md). */
export const AgentctlEnv = ActorEnv.extend({
  AGENTCTL_WAIT_MS: whole(0, 600_000, 10_000).describe(
    "How long, in milliseconds, a command waits for a NATS server, its JetStream and a supervisor when none answers yet, saying so on stderr, before it fails with `BUS_UNAVAILABLE`; 0: it fails at once. It replaces `NATS_CONNECT_WAIT_MS` for agentctl.",
  ),
});

/**
 * Runs `fn` with a client on a fresh connection, drained after; waits for a NATS server and for a
 * supervisor as AGENTCTL_WAIT_MS says.
 */
export async function withClient<T>(fn: (client: ClusterClient) => Promise<T>): Promise<T> {
  // NATS_URL unset, in a checkout whose `npm run cluster` is up: that cluster, with agentctl's login.
  const env = parseEnv(AgentctlEnv, { ...localClusterEnv(process.env), ...process.env });
  // stdout carries the command's answer, which scripts read: the log goes to stderr.
  const logger = createLogger({
    actor: "cli",
    level: env.LOG_LEVEL === "info" ? "error" : env.LOG_LEVEL,
    destination: process.stderr,
  });
  const waitMs = env.AGENTCTL_WAIT_MS;
  // A command waits for a NATS server as it waits for a supervisor (AGENTCTL_WAIT_MS).
  const bus: ActorBus = await openActorBus({ ...env, NATS_CONNECT_WAIT_MS: waitMs }, "agentctl", {
    clock: systemClock,
    random: systemRandom,
    logger,
    onConnectWait: () =>
      process.stderr.write(
        `no NATS server answers yet: waiting up to ${waitMs} ms for one (AGENTCTL_WAIT_MS)\n`,
      ),
    onJetStreamWait: () =>
      process.stderr.write(
        `the NATS server answers, its JetStream does not yet: waiting up to ${waitMs} ms for it (AGENTCTL_WAIT_MS)\n`,
      ),
    provisionWait: {
      waitMs,
      onWait: () =>
        process.stderr.write(
          `the streams and buckets are not provisioned for AGENTS_PREFIX '${env.AGENTS_PREFIX}' (AGENTS_REPLICAS ${env.AGENTS_REPLICAS}) and this user may not: waiting up to ${waitMs} ms for a supervisor to (AGENTCTL_WAIT_MS)\n`,
        ),
    },
  });
  try {
    const wait = {
      waitMs,
      clock: systemClock,
      random: systemRandom,
      onWait: () =>
        process.stderr.write(
          `no supervisor answers yet: waiting up to ${waitMs} ms for one (AGENTCTL_WAIT_MS)\n`,
        ),
    };
    return await fn(new ClusterClient(bus, waitMs > 0 ? wait : undefined));
  } catch (err) {
    // A request JetStream left unanswered: "INTERNAL: timeout" sent nobody to the right place.
    throw (
      refusedByPermissions(err, env.NATS_USER) ??
      jetStreamSilent("the command", err, bus.nc.getServer()) ??
      err
    );
  } finally {
    await bus.nc.drain();
  }
}

/**
 * A publish the server refused to this user, wherever in the error's causes: PERMISSION_DENIED,
 * not the BUS_UNAVAILABLE the request reported, which sends an operator looking for an outage.
 */
function refusedByPermissions(err: unknown, user: string | undefined): AgentError | undefined {
  for (let cause: unknown = err, depth = 0; cause instanceof Error && depth < 5; depth++) {
    const { message, cause: next } = cause;
    if (deniedByPermissions(cause)) {
      const who = user ? `NATS user '${user}'` : "this connection's NATS user";
      return new AgentError(
        "PERMISSION_DENIED",
        `the NATS server refused a publish to ${who}: ${message} (the wrong NATS_USER, or a permissions.conf older than this build: see deploy/k8s/base/nats/permissions.conf)`,
        { cause: err },
      );
    }
    cause = next;
  }
  return undefined;
}
