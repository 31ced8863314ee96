import { connect, errors } from "@nats-io/transport-node";
import type { NatsConnection, NodeConnectionOptions, Status, TlsOptions } from "@nats-io/transport-node";
import { systemClock, type Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import { authenticatorOf, loginText, type BusLogin } from "./login.js";
import { tlsRefusal } from "./tls-refusal.js";

/** How often a first connection is tried again while the server is unreachable. */
const FIRST_CONNECT_RETRY_MS = 1_000;

export interface BusConnectOptions {
  servers: string | string[];
  /** Shown in the server's connection list: which actor this is. */
  name: string;
  user?: string;
  pass?: string;
  /** Who to log in as, instead of `user` and `pass`: an NKey or a credentials file (see busLoginOf). */
  login?: BusLogin;
  /** TLS, required on every server when set (see busTlsOf); `{}` trusts the system's CAs. */
  tls?: TlsOptions;
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
  const login = loginOf(options);
  const settings = connectionOptions(options, login);
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await connect(settings);
    } catch (err) {
      const servers = [options.servers].flat().join(",");
      const refusal = refusalOf(err, servers, login, options.tls);
      if (refusal) throw refusal;
      if (!unreachable(err)) throw err;
      if (clock.now() >= deadline) {
        throw new AgentError(
          "BUS_UNAVAILABLE",
          `no NATS server answers at ${servers} (${err.message}; ${attempt} ${attempt === 1 ? "try" : "tries"} over ${clock.now() - began} ms)${unansweredHint(options.tls)}`,
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

/** The client's settings: reconnect for ever, the login's authenticator, TLS when asked for. */
function connectionOptions(options: BusConnectOptions, login: BusLogin): NodeConnectionOptions {
  const authenticator = authenticatorOf(login);
  return {
    servers: options.servers,
    name: options.name,
    ...(authenticator ? { authenticator } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 1_000,
    reconnectJitter: 500,
    timeout: options.timeoutMs ?? 5_000,
    noAsyncTraces: true,
  };
}

function loginOf(options: BusConnectOptions): BusLogin {
  if (options.login) return options.login;
  return options.user === undefined
    ? { kind: "none" }
    : { kind: "password", user: options.user, pass: options.pass ?? "" };
}

/** A failure waiting will not mend: the server refused the login, or TLS failed. */
function refusalOf(
  err: unknown,
  servers: string,
  login: BusLogin,
  tls: TlsOptions | undefined,
): AgentError | undefined {
  if (err instanceof errors.AuthorizationError) return refusedCredentials(servers, login, err);
  return tlsRefusal(err, servers, tls);
}

/** The server at `servers` answered and refused who this connection says it is: waiting will not help. */
function refusedCredentials(servers: string, login: BusLogin, cause: Error): AgentError {
  const fix =
    login.kind === "nkey" || login.kind === "creds"
      ? "give that key a user in the server's configuration, or point the variable at one it has"
      : "set NATS_USER and NATS_PASSWORD to a user of that server (`npm run cluster` prints its URL and the agentctl user's login), or NATS_NKEY_SEED_FILE or NATS_CREDS_FILE to a key it knows";
  return new AgentError("BUS_AUTH", `the NATS server at ${servers} refused ${loginText(login)}: ${fix}`, {
    cause,
  });
}

/**
 * A server that verifies clients closes a TLS connection without a client certificate, which the
 * client sees as no answer: the hint names the settings that would give it one.
 */
function unansweredHint(tls: TlsOptions | undefined): string {
  return tls && tls.certFile === undefined
    ? "; a server that verifies clients' certificates answers none without one: NATS_TLS_CERT and NATS_TLS_KEY"
    : "";
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
