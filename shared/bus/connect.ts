import { connect } from "@nats-io/transport-node";
import type { NatsConnection, Status } from "@nats-io/transport-node";
import type { Logger } from "../runtime/logger.js";

export interface BusConnectOptions {
  servers: string | string[];
  /** Shown in the server's connection list: which actor this is. */
  name: string;
  user?: string;
  pass?: string;
  logger: Logger;
  /** Give up on the first connection after this long; reconnects after that never give up. */
  timeoutMs?: number;
}

/**
 * Connects for the life of an actor: reconnects forever with jitter (a NATS restart or a leader
 * move must not kill a worker), logs every disconnect and reconnect, and turns off async stack
 * traces, which halves client throughput for a debugging aid nobody reads in production.
 */
export async function connectBus(options: BusConnectOptions): Promise<NatsConnection> {
  const nc = await connect({
    servers: options.servers,
    name: options.name,
    ...(options.user !== undefined ? { user: options.user, pass: options.pass ?? "" } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 1_000,
    reconnectJitter: 500,
    timeout: options.timeoutMs ?? 5_000,
    noAsyncTraces: true,
  });
  watchStatus(nc, options.logger).catch((err: unknown) =>
    options.logger.error({ err }, "status watcher failed"),
  );
  return nc;
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

/** The server's version as [major, minor, patch]; [0, 0, 0] when it did not say. */
export function serverVersion(nc: NatsConnection): [number, number, number] {
  const [major = 0, minor = 0, patch = 0] = (nc.info?.version ?? "0.0.0")
    .split(/[.-]/)
    .map((n) => Number.parseInt(n, 10) || 0);
  return [major, minor, patch];
}
