import { toAgentError } from "./errors.js";
import type { Logger } from "./logger.js";

/**
 * Where an actor's fatal failure is logged: first a default logger, then the configured one. Its
 * functions are closures, safe to pass on alone (`fail` is itself the uncaughtException listener).
 */
export interface FatalLog {
  /** Logs fatal failures with `logger` from now on (the actor's, once its configuration is read). */
  use: (logger: Logger) => void;
  /** Stops the actor on a failure found later, logged as one at start-up is. */
  fail: (err: unknown) => void;
}

/**
 * Makes a failure an actor process cannot go on from (its configuration invalid, its start-up
 * rejected: no NATS server within NATS_CONNECT_WAIT_MS, say) one structured log line with the
 * error's stable code, then exit code 1, instead of Node's stack trace on stderr, which log
 * pipelines cannot parse. Installed before the configuration is parsed, with a logger that needs
 * none; `use` hands it the actor's own.
 */
export function exitOnFatal(
  logger: Logger,
  exit: (code: number) => void = (code) => process.exit(code),
): FatalLog {
  let current = logger;
  const fail = (err: unknown): void => {
    const error = toAgentError(err);
    current.fatal({ err, code: error.code }, `stopping: ${error.message}`);
    exit(1);
  };
  process.on("uncaughtException", fail);
  return { use: (next) => (current = next), fail };
}
