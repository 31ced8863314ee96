import { AgentError, isAgentError } from "../../shared/runtime/errors.js";
import { confineLexically, confinePath } from "../../shared/tools/path-grant.js";

/**
 * How a path argument is checked before the server sees it: `real` follows symlinks (a stdio
 * server, on this machine), `lexical` only normalises `.` and `..` (a server elsewhere, whose
 * links the bridge cannot see).
 */
export type PathResolution = "real" | "lexical";

export interface PathCheck {
  /** The cluster's name of the tool, for messages. */
  tool: string;
  /** The arguments that hold a path or a list of paths. */
  pathArguments: readonly string[];
  /** The call's grant's `allowedPaths`; undefined: the grant allows no path. */
  allowedPaths: readonly string[] | undefined;
  resolution: PathResolution;
}

/**
 * The call's arguments with every path argument replaced by its checked path, once each is found
 * within the grant's allowedPaths by the check every tool uses (shared/tools/path-grant.ts): the
 * server then acts on exactly the path that was checked. A relative path (or `~`) is refused: what
 * it means depends on the server's working directory, which the bridge does not know.
 * PATH_NOT_ALLOWED names the argument and the path.
 */
export async function confinePaths(
  args: Record<string, unknown>,
  check: PathCheck,
): Promise<Record<string, unknown>> {
  const present = check.pathArguments.filter((name) => args[name] !== undefined);
  if (present.length === 0) return args;
  const { allowedPaths } = check;
  if (!allowedPaths) {
    throw new AgentError(
      "PATH_NOT_ALLOWED",
      `tool '${check.tool}' takes paths (${present.join(", ")}): its mcp grant needs allowedPaths`,
    );
  }
  const confined = { ...args };
  for (const name of present) {
    const value = args[name];
    const paths = typeof value === "string" ? [value] : value;
    if (!Array.isArray(paths) || !paths.every((p): p is string => typeof p === "string")) {
      throw new AgentError(
        "INVALID_INPUT",
        `tool '${check.tool}': '${name}' must be a path or a list of paths`,
      );
    }
    const checked = await Promise.all(paths.map((p) => confineOne(p, name, allowedPaths, check)));
    confined[name] = typeof value === "string" ? checked[0] : checked;
  }
  return confined;
}

async function confineOne(
  path: string,
  name: string,
  allowedPaths: readonly string[],
  check: PathCheck,
): Promise<string> {
  try {
    if (check.resolution === "lexical") return confineLexically(path, allowedPaths, "refused");
    return (await confinePath(path, allowedPaths, "refused")).real;
  } catch (err) {
    if (!isAgentError(err) || err.code !== "PATH_NOT_ALLOWED") throw err;
    throw new AgentError("PATH_NOT_ALLOWED", `tool '${check.tool}': '${name}' ${err.message}`, {
      cause: err,
    });
  }
}
