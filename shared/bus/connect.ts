import { connect, errors } from "@nats-io/transport-node";
import type { NatsConnection, Status } from "@nats-io/transport-node";
import { systemClock, type Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";

/** How often a first connection is tried again while the server is unreachable. */
const FIRST_CONNECT_RETRY_MS = 1_000;

export interface BusConnectOptions {
  servers: string | string[];
  /** Shown in the server's connection list: which actor this is. */
  name: string;
  user?: string;
  pass?: string;
  logger: Logger;
  /** Give up on the first connection after this long; reconnects after that never give up. */
  timeoutMs?: number;
  /**
   * How long to keep trying a first connection while no server answers (one starting after this
   * process, or restarting): BUS_UNAVAILABLE after that. 0: one try.
   */
  waitMs?: number;
  clock?: Clock;
  /** Called once when the first try finds no server and waiting begins. */
  onWait?: (error: Error) => void;
}

/**
 * Connects for the life of an actor: reconnects forever with jitter (a NATS restart or a leader
 * move must not kill a worker), logs every disconnect and reconnect, and turns off async stack
 * traces, which halves client throughput for a debugging aid nobody reads in production.
 */
export async function connectBus(options: BusConnectOptions): Promise<NatsConnection> {
  const nc = await firstConnection(options);
  watchStatus(nc, options.logger).catch((err: unknown) =>
    options.logger.error({ err }, "status watcher failed"),
  );
  return nc;
}

/**
 * The first connection, tried again every second for `waitMs` while no server answers. A server
 * that answers and refuses the credentials is not waited for: that is the configuration's fault.
 */
async function firstConnection(options: BusConnectOptions): Promise<NatsConnection> {
  const clock = options.clock ?? systemClock;
  const began = clock.now();
  const deadline = began + (options.waitMs ?? 0);
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await connect({
        servers: options.servers,
        name: options.name,
        ...(options.user !== undefined ? { user: options.user, pass: options.pass ?? "" } : {}),
        maxReconnectAttempts: -1,
        reconnectTimeWait: 1_000,
        reconnectJitter: 500,
        timeout: options.timeoutMs ?? 5_000,
        noAsyncTraces: true,
      });
    } catch (err) {
      const servers = [options.servers].flat().join(",");
      if (err instanceof errors.AuthorizationError) throw refusedCredentials(servers, options.user, err);
      if (!unreachable(err)) throw err;
      if (clock.now() >= deadline) {
        throw new AgentError(
          "BUS_UNAVAILABLE",
          `no NATS server answers at ${servers} (${err.message}; ${attempt} ${attempt === 1 ? "try" : "tries"} over ${clock.now() - began} ms)`,
          { cause: err },
        );
      }
      if (attempt === 1) options.onWait?.(err);
      if (attempt % 10 === 1) {
        options.logger.warn(
          { servers, attempt, reason: err.message, waitMs: options.waitMs },
          "no NATS server answers yet: waiting for one",
        );
      }
      await clock.sleep(Math.min(FIRST_CONNECT_RETRY_MS, Math.max(0, deadline - clock.now())));
    }
  }
}

/** The server at `servers` answered and refused who this connection says it is: waiting will not help. */
function refusedCredentials(servers: string, user: string | undefined, cause: Error): AgentError {
  const who = user === undefined ? "no user (NATS_USER is unset)" : `user '${user}'`;
  return new AgentError(
    "BUS_AUTH",
    `the NATS server at ${servers} refused ${who}: set NATS_USER and NATS_PASSWORD to a user of that server (\`npm run cluster\` prints its URL and the agentctl user's login)`,
    { cause },
  );
}

/**
 * Nobody answered (refused, timed out, no route): a server may come. A server's refusal (an
 * AuthorizationError) will not go away by waiting.
 */
function unreachable(err: unknown): err is Error {
  return err instanceof errors.ConnectionError || err instanceof errors.TimeoutError;
}

async function watchStatus(nc: NatsConnection, logger: Logger): Promise<void> {
  for await (const status of nc.status()) logStatus(logger, status);
}

export function logStatus(logger: Logger, status: Status): void {
  switch (status.type) {
    case "disconnect":
      logger.warn({ server: status.server }, "disconnected from NATS; reconnecting");
      break;
    case "reconnect":
      logger.info({ server: status.server }, "reconnected to NATS");
      break;
    case "error":
    case "ldm":
    case "slowConsumer":
    case "staleConnection":
      logger.warn({ status }, `NATS ${status.type}`);
      break;
    default:
      logger.debug({ status: status.type }, "NATS status");
  }
}
