import { z } from "zod";
import { AgentError } from "../../runtime/errors.js";
import { defineTool, type ToolDefinition } from "../tool.js";
import { COMMAND_PATH, grantedExecutable } from "./command-grant.js";
import { runCommand, type CommandResult } from "./command-run.js";
import { confinePath } from "../path-grant.js";

/** The most kept of a command's stdout, and of its stderr. */
export const MAX_COMMAND_OUTPUT_BYTES = 64 * 1024;
/** The uid and gid commands run as when the tools actor runs as root and names none: `nobody`. */
export const NOBODY = 65_534;
export const DEFAULT_COMMAND_TIMEOUT_MS = 60_000;

const Arg = z
  .string()
  .max(32_768)
  .refine((arg) => !arg.includes("\0"), "no NUL byte");

export const ShellInput = z.object({
  command: z.string().min(1).max(4096),
  args: z.array(Arg).max(256).default([]),
  /** The working directory, inside the tool's roots; absent: the first root. */
  cwd: z.string().min(1).max(4096).optional(),
  timeoutMs: z.number().int().min(1).optional(),
});
export type ShellInput = z.infer<typeof ShellInput>;

/** How the tools actor runs commands (TOOLS_SHELL_* in its environment). */
export interface ShellConfig {
  /** Directories a command's working directory must be inside (confined like file paths). */
  roots: readonly string[];
  /** Whom commands run as (see shellIdentity); absent: this process's user. */
  identity?: { uid: number; gid: number };
  /** The longest a command may run; a call may ask for less. */
  maxTimeoutMs: number;
}

/**
 * Whom commands run as. A tools actor running as root runs them as `uid`/`gid`, by default
 * `nobody` (65534): root's commands could undo every check the tool makes. Any other user cannot
 * switch (the kernel refuses), so it runs them as itself and refuses a `uid`/`gid` not its own.
 */
export function shellIdentity(
  wanted: { uid?: number | undefined; gid?: number | undefined },
  self: { uid: number; gid: number } | undefined,
): { uid: number; gid: number } | undefined {
  if (!self) return undefined;
  if (self.uid === 0) return { uid: wanted.uid ?? NOBODY, gid: wanted.gid ?? NOBODY };
  const other = (wanted.uid ?? self.uid) !== self.uid || (wanted.gid ?? self.gid) !== self.gid;
  if (other)
    throw new AgentError(
      "INVALID_INPUT",
      `TOOLS_SHELL_UID/TOOLS_SHELL_GID name another user, and only a tools actor running as root can run commands as one (this one runs as ${self.uid}:${self.gid})`,
    );
  return undefined;
}

/** The end of a command's output, for the message of a failed call. */
const tail = (text: string): string => (text.length > 2_000 ? `…${text.slice(-2_000)}` : text);

function failure(command: string, result: CommandResult, timeoutMs: number): AgentError {
  const how = result.timedOut
    ? `timed out after ${timeoutMs} ms and was killed`
    : result.exitCode === null
      ? `was killed by ${result.killedBy ?? "a signal"}`
      : `exited with code ${result.exitCode}`;
  return new AgentError(
    "TOOL_FAILED",
    `command '${command}' ${how}\nstdout: ${tail(result.stdout)}\nstderr: ${tail(result.stderr)}`,
    { details: { exitCode: result.exitCode, timedOut: result.timedOut } },
  );
}

/**
 * Runs one granted program with its arguments (shell{allowedCommands}): never a shell string, in
 * a working directory inside the configured roots, with a minimal environment, a timeout that
 * kills its process group, and capped output. Exit code 0 is success; anything else fails the call
 * with the output's end in the message. Not idempotent and irreversible: what a command did is
 * not known to the runtime, so a tool service runs each call at most once (its idempotency record).
 */
export function createShellTool(config: ShellConfig): ToolDefinition<ShellInput, unknown> {
  return defineTool({
    name: "shell",
    description:
      "Runs one allowed program with arguments (argv; no shell: no pipes, redirections or variables) in a working directory inside the allowed roots. Returns exit code, stdout and stderr; a non-zero exit fails the call.",
    input: ShellInput,
    capability: { kind: "shell" },
    reversibility: "irreversible",
    idempotent: false,
    // The command's own timeout ends it first; this one covers the checks and the kill.
    timeoutMs: config.maxTimeoutMs + 5_000,
    execute: async (input, ctx) => {
      const allowed = ctx.granted.kind === "shell" ? ctx.granted.allowedCommands : [];
      const file = await grantedExecutable(input.command, allowed);
      const root = config.roots[0];
      if (root === undefined)
        throw new AgentError(
          "PATH_NOT_ALLOWED",
          "no working directory is configured for commands (TOOLS_SHELL_ROOTS)",
        );
      const cwd = await confinePath(input.cwd ?? root, [...config.roots]);
      if (!cwd.exists) throw new AgentError("NOT_FOUND", `directory '${cwd.requested}' does not exist`);
      const timeoutMs = Math.min(input.timeoutMs ?? config.maxTimeoutMs, config.maxTimeoutMs);
      const result = await runCommand({
        file,
        argv0: input.command,
        args: input.args,
        cwd: cwd.real,
        env: { PATH: COMMAND_PATH, HOME: cwd.real, LANG: "C.UTF-8" },
        ...(config.identity ? { identity: config.identity } : {}),
        timeoutMs,
        maxOutputBytes: MAX_COMMAND_OUTPUT_BYTES,
        signal: ctx.signal,
      });
      if (result.exitCode !== 0 || result.timedOut) throw failure(input.command, result, timeoutMs);
      return {
        output: { exitCode: 0, stdout: result.stdout, stderr: result.stderr, truncated: result.truncated },
      };
    },
  });
}
