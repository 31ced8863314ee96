import { z } from "zod";
import { AgentError } from "../../runtime/errors.js";
import { defineTool, type ToolDefinition } from "../tool.js";
import { COMMAND_PATH, grantedExecutable } from "./command-grant.js";
import { runCommand, type CommandResult } from "./command-run.js";
import { inPidNamespace, type PidNamespace } from "./pid-namespace.js";
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
  /** With `identity`: run each command in a PID namespace of its own (see probePidNamespace). */
  pidNamespace?: PidNamespace;
}

const sameUser = (why: string): AgentError =>
  new AgentError(
    "INVALID_INPUT",
    `${why}, so a granted program could read this actor's credentials (/proc/<pid>/environ: NATS_PASSWORD; its key files): run the tools actor as root (commands then run as TOOLS_SHELL_UID, default nobody), or set TOOLS_SHELL_SAME_USER=true to accept that`,
  );

/**
 * Whom commands run as. A tools actor running as root runs them as `uid`/`gid`, by default
 * `nobody` (65534): root's commands could undo every check the tool makes. Any other user cannot
 * switch (the kernel refuses), so it would run them as itself and refuses a `uid`/`gid` not its
 * own. Commands run as the actor's own user can read its credentials: refused unless `sameUser`
 * (TOOLS_SHELL_SAME_USER) says the operator accepts it.
 */
export function shellIdentity(
  wanted: { uid?: number | undefined; gid?: number | undefined },
  self: { uid: number; gid: number } | undefined,
  allowSameUser = false,
): { uid: number; gid: number } | undefined {
  if (!self) {
    if (allowSameUser) return undefined;
    throw sameUser("this platform cannot switch users: commands would run as the tools actor itself");
  }
  if (self.uid === 0) {
    const identity = { uid: wanted.uid ?? NOBODY, gid: wanted.gid ?? NOBODY };
    if (identity.uid === 0 && !allowSameUser) throw sameUser("TOOLS_SHELL_UID=0 runs commands as root");
    return identity;
  }
  const other = (wanted.uid ?? self.uid) !== self.uid || (wanted.gid ?? self.gid) !== self.gid;
  if (other)
    throw new AgentError(
      "INVALID_INPUT",
      `TOOLS_SHELL_UID/TOOLS_SHELL_GID name another user, and only a tools actor running as root can run commands as one (this one runs as ${self.uid}:${self.gid})`,
    );
  if (!allowSameUser)
    throw sameUser(`this tools actor runs as ${self.uid}, not root: commands would run as its own user`);
  return undefined;
}

/**
 * A command that did not finish: timed out, or killed. Its output is left out (the message and
 * `details` are not redacted by output paths, only the result is).
 */
function unfinished(command: string, result: CommandResult, timeoutMs: number): AgentError {
  const how = result.timedOut
    ? `timed out after ${timeoutMs} ms and was killed`
    : `was killed by ${result.killedBy ?? "a signal"}`;
  return new AgentError("TOOL_FAILED", `command '${command}' ${how}`, {
    details: { exitCode: result.exitCode, timedOut: result.timedOut, killedBy: result.killedBy },
  });
}

/** How the command is started: straight, or in a PID namespace of its own as `identity`. */
function launch(
  config: ShellConfig,
  found: { path: string; real: string },
  command: string,
  args: readonly string[],
): { file: string; argv0: string; args: readonly string[]; identity?: { uid: number; gid: number } } {
  if (config.identity && config.pidNamespace) {
    const run = inPidNamespace(config.pidNamespace, config.identity, found.path, args);
    return { ...run, argv0: run.file };
  }
  return {
    file: found.real,
    argv0: command,
    args,
    ...(config.identity ? { identity: config.identity } : {}),
  };
}

/**
 * Runs one granted program with its arguments (shell{allowedCommands}): never a shell string, in
 * a working directory inside the configured roots, with a minimal environment, a timeout that
 * kills its process group (its PID namespace under root), and capped output. A command that exits
 * answers its exit code and output, whatever the code: `grep` finding nothing is an answer, not a
 * failure of the tool (it must not open the tool's circuit breaker), and the output stays where
 * output redaction rules apply. One timed out or killed fails the call. Not idempotent and irreversible: what a command did is
 * not known to the runtime, so a tool service runs each call at most once (its idempotency record).
 */
export function createShellTool(config: ShellConfig): ToolDefinition<ShellInput, unknown> {
  return defineTool({
    name: "shell",
    description:
      "Runs one allowed program with arguments (argv; no shell: no pipes, redirections or variables) in a working directory inside the allowed roots. Returns its exit code (check it: non-zero is the program's failure), stdout and stderr; a command that times out fails the call.",
    input: ShellInput,
    capability: { kind: "shell" },
    reversibility: "irreversible",
    idempotent: false,
    // The command's own timeout ends it first; this one covers the checks and the kill.
    timeoutMs: config.maxTimeoutMs + 5_000,
    execute: async (input, ctx) => {
      const allowed = ctx.granted.kind === "shell" ? ctx.granted.allowedCommands : [];
      const found = await grantedExecutable(input.command, allowed);
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
        ...launch(config, found, input.command, input.args),
        cwd: cwd.real,
        env: { PATH: COMMAND_PATH, HOME: cwd.real, LANG: "C.UTF-8" },
        timeoutMs,
        maxOutputBytes: MAX_COMMAND_OUTPUT_BYTES,
        signal: ctx.signal,
      });
      if (result.exitCode === null || result.timedOut) throw unfinished(input.command, result, timeoutMs);
      const { exitCode, stdout, stderr, truncated } = result;
      return { output: { exitCode, stdout, stderr, truncated } };
    },
  });
}
