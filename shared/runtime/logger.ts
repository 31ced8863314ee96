import { pino, type Logger } from "pino";

export type { Logger } from "pino";

/** Keys whose values never reach a log line, whatever object they sit in. */
export const REDACTED_KEYS = [
  "apiKey",
  "authorization",
  "Authorization",
  "x-api-key",
  "password",
  "token",
  "secret",
] as const;

export interface LoggerOptions {
  level?: string;
  actor: string;
  destination?: NodeJS.WritableStream;
}

/** JSON logs with the actor on every line; runId, phase and iteration come from child loggers. */
export function createLogger(options: LoggerOptions): Logger {
  const paths = REDACTED_KEYS.flatMap((key) => [key, `*.${key}`, `*.*.${key}`].map((p) => quotePath(p)));
  return pino(
    {
      level: options.level ?? "info",
      base: { actor: options.actor },
      redact: { paths, censor: "[REDACTED]" },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? process.stdout,
  );
}

function quotePath(path: string): string {
  return path
    .split(".")
    .map((part) => (/^[A-Za-z_$][\w$]*$/.test(part) || part === "*" ? part : `["${part}"]`))
    .join(".")
    .replaceAll(".[", "[");
}

export const silentLogger: Logger = pino({ level: "silent" });
