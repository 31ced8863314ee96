import { realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { AgentError } from "../../shared/runtime/errors.js";

/** A path as the server would reach it: symlinks followed (real), or only normalised (lexical). */
export type ResolvePath = (path: string) => Promise<string>;

/** Normalises `..` and `.` away; for a server on another machine, whose links the bridge cannot see. */
export const lexicalPath: ResolvePath = (path) => Promise.resolve(resolve(path));

/**
 * The real path of `path`: links followed. A path that does not exist yet (a file to write) is
 * its nearest existing ancestor's real path with the rest appended, so a link on the way is
 * followed all the same.
 */
export const realPath: ResolvePath = async (path) => {
  const absolute = resolve(path);
  try {
    return await realpath(absolute);
  } catch (err) {
    const parent = dirname(absolute);
    if ((err as NodeJS.ErrnoException).code !== "ENOENT" || parent === absolute) throw err;
    return join(await realPath(parent), basename(absolute));
  }
};

const within = (path: string, root: string): boolean =>
  path === root || path.startsWith(root.endsWith(sep) ? root : `${root}${sep}`);

export interface PathCheck {
  /** The cluster's name of the tool, for messages. */
  tool: string;
  /** The arguments that hold a path or a list of paths. */
  pathArguments: readonly string[];
  /** The call's grant's `allowedPaths`; undefined: the grant allows no path. */
  allowedPaths: readonly string[] | undefined;
  resolvePath: ResolvePath;
}

/**
 * The call's arguments with every path argument replaced by its resolved path, once each is found
 * within one of the grant's allowed paths (resolved alike): the server then acts on exactly the
 * path that was checked. A relative path (or `~`) is refused: what it means depends on the
 * server's working directory, which the bridge does not know. CAPABILITY_DENIED names the path.
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
      "CAPABILITY_DENIED",
      `tool '${check.tool}' takes paths (${present.join(", ")}): its mcp grant needs allowedPaths`,
    );
  }
  const anywhere = allowedPaths.includes("*");
  const roots = anywhere ? [] : await Promise.all(allowedPaths.map((p) => check.resolvePath(p)));
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
    const resolved = await Promise.all(paths.map((p) => confineOne(p, name, roots, anywhere, check)));
    confined[name] = typeof value === "string" ? resolved[0] : resolved;
  }
  return confined;
}

async function confineOne(
  path: string,
  name: string,
  roots: readonly string[],
  anywhere: boolean,
  check: PathCheck,
): Promise<string> {
  if (!isAbsolute(path)) {
    throw new AgentError(
      "CAPABILITY_DENIED",
      `tool '${check.tool}': '${name}' must be an absolute path, not '${path}'`,
    );
  }
  const resolved = await check.resolvePath(path).catch((err: unknown) => {
    // A path through a file, or a directory this process may not read: nothing to check it by.
    throw new AgentError(
      "CAPABILITY_DENIED",
      `tool '${check.tool}': '${name}' '${path}' cannot be resolved`,
      {
        cause: err,
      },
    );
  });
  if (anywhere || roots.some((root) => within(resolved, root))) return resolved;
  throw new AgentError(
    "CAPABILITY_DENIED",
    `tool '${check.tool}': '${name}' ${path === resolved ? `'${path}'` : `'${path}' (${resolved})`} is outside the grant's allowedPaths`,
  );
}
