import { constants } from "node:fs";
import { access, realpath, stat } from "node:fs/promises";
import { basename, isAbsolute, join } from "node:path";
import { AgentError } from "../../runtime/errors.js";

/**
 * The shell tool's command check: a command is a bare name (looked up on a fixed PATH) or an
 * absolute path, granted when an `allowedCommands` entry names it (the same name, or an absolute
 * path ending in it) and both resolve to the same executable. Both, because a multi-call binary
 * (BusyBox: `wc` and `sh` are links to one file) picks what it does by the name it is run as, and
 * a symlink named like a granted program may lead to another one. `commandShape` is pure; the
 * rest reads the file system.
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

/** Where a command was found: the path looked up (its name ends it) and the executable's real path. */
export interface FoundCommand {
  path: string;
  real: string;
}

/** The executable a command names (see FoundCommand), undefined when there is none. */
export async function findExecutable(
  command: string,
  searchPath = COMMAND_PATH,
): Promise<FoundCommand | undefined> {
  if (commandShape(command) !== undefined) return undefined;
  const candidates = isAbsolute(command)
    ? [command]
    : searchPath
        .split(":")
        .filter((dir) => isAbsolute(dir))
        .map((dir) => join(dir, command));
  for (const candidate of candidates)
    if (await isExecutableFile(candidate)) return { path: candidate, real: await realpath(candidate) };
  return undefined;
}

/** The real path of the executable a command names, undefined when there is none. */
export async function resolveExecutable(
  command: string,
  searchPath = COMMAND_PATH,
): Promise<string | undefined> {
  return (await findExecutable(command, searchPath))?.real;
}

/** Whether a grant entry names a command: the same name, whether either is given by absolute path. Pure. */
export const namesCommand = (entry: string, command: string): boolean =>
  entry === command || basename(entry) === basename(command);

/**
 * The executable a granted command runs: COMMAND_NOT_ALLOWED for a shell string, or a program no
 * grant entry both names and resolves to (`"*"` grants any program), NOT_FOUND for a name that
 * resolves to nothing. Run it under its own name (`path`, or argv0 = `command`): never another.
 */
export async function grantedExecutable(
  command: string,
  allowedCommands: readonly string[],
  searchPath = COMMAND_PATH,
): Promise<FoundCommand> {
  const shape = commandShape(command);
  if (shape) throw refused(shape);
  const found = await findExecutable(command, searchPath);
  if (!found) throw new AgentError("NOT_FOUND", `command '${command}' was not found on ${searchPath}`);
  if (allowedCommands.includes("*")) return found;
  const naming = allowedCommands.filter((entry) => namesCommand(entry, command));
  const granted = await Promise.all(naming.map((entry) => resolveExecutable(entry, searchPath)));
  if (granted.includes(found.real)) return found;
  const why = naming.length === 0 ? "no entry names it" : `the entry naming it is another program`;
  throw refused(`command '${command}' (${found.real}) is not in allowed_commands: ${why}`);
}
