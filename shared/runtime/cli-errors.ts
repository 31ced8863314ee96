/**
 * How the command-line tools fail: one JSON line on stderr, `{"error":{"code","message"}}`, exit
 * code 2, so a script reads stderr as the error. A bad flag or argument is INVALID_INPUT.
 */
import { type Command, CommanderError } from "commander";
import { type ErrorCode, toAgentError } from "./errors.js";

/** Keeps commander from printing its own error line (its subcommands inherit the setting). */
export function jsonErrors(cmd: Command): Command {
  return cmd.exitOverride().configureOutput({ outputError: () => undefined });
}

/**
 * Writes a command's failure as its one JSON line and sets exit code 2; `--help` and `--version`
 * (commander's exit code 0) are not failures.
 */
export function reportCliError(err: unknown, fallback: ErrorCode = "INTERNAL"): void {
  if (err instanceof CommanderError && err.exitCode === 0) return;
  const error =
    err instanceof CommanderError
      ? toAgentError(new Error(err.message.replace(/^error: /, "")), "INVALID_INPUT")
      : toAgentError(err, fallback);
  process.stderr.write(`${JSON.stringify({ error: { code: error.code, message: error.message } })}\n`);
  process.exitCode = 2;
}

/**
 * A reader that stops reading (`agentctl runs --all | head`) closes stdout under the next write:
 * the command has nothing left to do, so it ends quietly, as `cat` does, not with a stack trace.
 */
export function endQuietlyWhenStdoutCloses(): void {
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE") throw err;
    process.exit(0);
  });
}
