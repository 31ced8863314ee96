import { toAgentError } from "./errors.js";
import type { Logger } from "./logger.js";

/**
 * Makes a failure an actor process cannot go on from (its start-up rejected: no NATS server
 * within NATS_CONNECT_WAIT_MS, say) one structured log line with the error's stable code, then
 * exit code 1, instead of Node's stack trace on stderr, which log pipelines cannot parse.
 */
export function exitOnFatal(
  logger: Logger,
  exit: (code: number) => void = (code) => process.exit(code),
): void {
  process.on("uncaughtException", (err: unknown) => {
    const error = toAgentError(err);
    logger.fatal({ err, code: error.code }, `stopping: ${error.message}`);
    exit(1);
  });
}
