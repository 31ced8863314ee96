import { constants } from "node:fs";
import { access, realpath, stat } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { AgentError } from "../../runtime/errors.js";

/**
 * The shell tool's command check: a command is a bare name (looked up on a fixed PATH) or an
 * absolute path, matched against the grant's `allowedCommands` by the executable it resolves to,
 * so neither another name for a granted program nor a symlink to an ungranted one changes the
 * answer. `commandShape` is pure; the rest reads the file system.
 */

/** The PATH commands are looked up on and run with: the system's directories only, never the caller's. */
export const COMMAND_PATH = "/usr/local/bin:/usr/bin:/bin";

/** Letters, digits and `._+-/`: a command name with anything else is a shell string, not a program. */
const COMMAND_NAME = /^[A-Za-z0-9._+/-]+$/;

const refused = (message: string): AgentError => new AgentError("COMMAND_NOT_ALLOWED", message);

/**
 * Why a command name is no program name (a shell string: `;`, `$(…)`, backticks, `&&`, spaces;
 * or a relative path), undefined when it is a bare name or an absolute path. Pure.
 */
export function commandShape(command: string): string | undefined {
  if (!COMMAND_NAME.test(command))
    return `'${command}' is not a command name: the shell tool runs one program with its arguments (argv), never a shell string`;
  if (command.includes("/") && !isAbsolute(command))
    return `'${command}' is a relative path: give a command name or an absolute path`;
  if (command === "." || command === "..") return `'${command}' is not a command name`;
  return undefined;
}

async function isExecutableFile(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/** The real path of the executable a command names, undefined when there is none. */
export async function resolveExecutable(
  command: string,
  searchPath = COMMAND_PATH,
): Promise<string | undefined> {
  if (commandShape(command) !== undefined) return undefined;
  const candidates = isAbsolute(command)
    ? [command]
    : searchPath
        .split(":")
        .filter((dir) => isAbsolute(dir))
        .map((dir) => join(dir, command));
  for (const candidate of candidates) if (await isExecutableFile(candidate)) return realpath(candidate);
  return undefined;
}

/**
 * The executable a granted command runs: COMMAND_NOT_ALLOWED for a shell string or a program the
 * grant does not name (each grant entry resolved like the command; `"*"` grants any program),
 * NOT_FOUND for a name that resolves to nothing.
 */
export async function grantedExecutable(
  command: string,
  allowedCommands: readonly string[],
  searchPath = COMMAND_PATH,
): Promise<string> {
  const shape = commandShape(command);
  if (shape) throw refused(shape);
  const executable = await resolveExecutable(command, searchPath);
  if (!executable) throw new AgentError("NOT_FOUND", `command '${command}' was not found on ${searchPath}`);
  if (allowedCommands.includes("*")) return executable;
  const granted = await Promise.all(allowedCommands.map((entry) => resolveExecutable(entry, searchPath)));
  if (granted.includes(executable)) return executable;
  throw refused(`command '${command}' (${executable}) is not in allowed_commands`);
}
