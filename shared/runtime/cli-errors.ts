/**
 * How the command-line tools fail: one JSON line on stderr, `{"error":{"code","message"}}`, exit
 * code 2, so a script reads stderr as the error. A bad flag or argument is INVALID_INPUT. A person
 * at a terminal (stderr a TTY) reads the same code and message as lines instead.
 */
import { type Command, CommanderError } from "commander";
import { type ErrorCode, toAgentError } from "./errors.js";

/** Where an error is written: stderr, or a test's stand-in for it. */
export interface ErrorStream {
  isTTY?: boolean;
  write(text: string): unknown;
}

/**
 * Keeps commander from printing its own error line (its subcommands inherit the setting). Help
 * commander shows because a command was left out (`agentctl`, `agentctl audit`) goes to stdout
 * like any other help: it is what was asked for, not an error.
 */
export function jsonErrors(cmd: Command): Command {
  return cmd.exitOverride().configureOutput({
    outputError: () => undefined,
    writeErr: (text) => process.stdout.write(text),
  });
}

/**
 * Writes a command's failure, as its one JSON line or, on a terminal, as lines, and sets exit code
 * 2; help (`--help`, `help`, a command left out) and `--version` are not failures.
 */
export function reportCliError(
  err: unknown,
  fallback: ErrorCode = "INTERNAL",
  stderr: ErrorStream = process.stderr,
): void {
  if (err instanceof CommanderError && (err.exitCode === 0 || err.code === "commander.help")) return;
  const error =
    err instanceof CommanderError
      ? toAgentError(new Error(err.message.replace(/^error: /, "")), "INVALID_INPUT")
      : toAgentError(err, fallback);
  stderr.write(errorText(error.code, error.message, stderr.isTTY === true));
  process.exitCode = 2;
}

/**
 * An error as written: one JSON line for a script; for a terminal, the code then the message's
 * lines indented, so a validation error's list reads as a list, not as `\n` in a string.
 */
export function errorText(code: string, message: string, tty: boolean): string {
  if (!tty) return `${JSON.stringify({ error: { code, message } })}\n`;
  const [first = "", ...rest] = message.split("\n");
  return `error ${code}: ${first}\n${rest.map((line) => `  ${line}\n`).join("")}`;
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
