import { realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { AgentError } from "../runtime/errors.js";

/**
 * Confinement of a path a tool call names to a grant's `allowedPaths`: directories (or single
 * files) given as absolute paths, `"*"` for any path. One check for every tool that takes paths:
 * the built-in file tools, the shell tool's working directory, and the MCP bridge's path
 * arguments. The lexical part is pure; `confinePath` also resolves symlinks and checks where they
 * lead. A refusal is always PATH_NOT_ALLOWED.
 */

/** Whether `path` is `root` itself or lies below it; both absolute and normalised. */
export function isWithin(root: string, path: string): boolean {
  if (root === path) return true;
  const rel = relative(root, path);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}

/** Whether the pattern list grants every path. */
export const grantsAnyPath = (allowedPaths: readonly string[]): boolean => allowedPaths.includes("*");

/** Whether an `allowedPaths` entry can grant anything: an absolute path, or `"*"`. */
export const isGrantablePath = (entry: string): boolean => entry === "*" || isAbsolute(entry);

const denied = (message: string, cause?: unknown): AgentError =>
  new AgentError("PATH_NOT_ALLOWED", message, cause === undefined ? {} : { cause });

/**
 * What a relative path in a call means. `fromFirstGrant`: it starts from the grant's first
 * directory (the file tools, which run where the grant's paths are). `refused`: it means whatever
 * the working directory of a process the checker does not know (an MCP server) makes of it.
 */
export type RelativePaths = "fromFirstGrant" | "refused";

/**
 * The absolute, normalised path a request names, before any symlink is followed. A path starting
 * with `~` is refused, never expanded: no home directory is meant, and a directory named `~` is
 * rarely what a model wants. So are an empty path, a NUL byte, and a relative path that has no
 * meaning under `relative`. Pure.
 */
export function requestedPath(
  requested: string,
  allowedPaths: readonly string[],
  relativePaths: RelativePaths = "fromFirstGrant",
): string {
  if (requested.length === 0 || requested.includes("\0"))
    throw denied("the path is empty or holds a NUL byte");
  if (requested.startsWith("~"))
    throw denied(`'${requested}': '~' is not expanded to a home directory; give an absolute path`);
  if (isAbsolute(requested)) return resolve(requested);
  if (relativePaths === "refused")
    throw denied(`'${requested}' is relative, and its meaning depends on the server; give an absolute path`);
  const base = allowedPaths.find((p) => p !== "*" && isAbsolute(p));
  if (!base) throw denied(`relative path '${requested}' with no granted directory to start from`);
  return resolve(base, requested);
}

/** The granted roots, as absolute normalised paths (relative patterns grant nothing). Pure. */
export function lexicalRoots(allowedPaths: readonly string[]): string[] {
  return allowedPaths.filter((p) => p !== "*" && isAbsolute(p)).map((p) => resolve(p));
}

/** Whether a path lies inside one of the roots, or the grant is "*". Pure. */
export function insideGrant(
  path: string,
  roots: readonly string[],
  allowedPaths: readonly string[],
): boolean {
  return grantsAnyPath(allowedPaths) || roots.some((root) => isWithin(root, path));
}

/**
 * The lexical check alone, for a path used where its links cannot be seen (an MCP server on
 * another machine): `.` and `..` normalised, the result inside the grant. Pure.
 */
export function confineLexically(
  requested: string,
  allowedPaths: readonly string[],
  relativePaths: RelativePaths = "fromFirstGrant",
): string {
  const asked = requestedPath(requested, allowedPaths, relativePaths);
  if (!insideGrant(asked, lexicalRoots(allowedPaths), allowedPaths))
    throw denied(`'${requested}' is outside the granted paths`);
  return asked;
}

const isMissing = (err: unknown): boolean =>
  typeof err === "object" && err !== null && (err as { code?: string }).code === "ENOENT";

/** The real paths of the granted roots that exist (a root that does not exist grants nothing). */
export async function realRoots(allowedPaths: readonly string[]): Promise<string[]> {
  const roots = await Promise.all(
    lexicalRoots(allowedPaths).map((root) =>
      realpath(root).catch((err: unknown) => {
        if (isMissing(err)) return undefined;
        throw err;
      }),
    ),
  );
  return roots.filter((root): root is string => root !== undefined);
}

export interface ConfinedPath {
  /** The path as asked, made absolute. */
  requested: string;
  /** Where it really is: every symlink followed (for a path not yet existing: its nearest existing ancestor's). */
  real: string;
  exists: boolean;
}

/**
 * Resolves a requested path and checks it against the grant: symlinks are followed and the target
 * checked, a `..` counts only where it lands, and a path that does not exist yet is resolved
 * through its nearest existing ancestor (so a symlinked directory on the way cannot lead a new
 * file outside). The lexical path must be inside the grant too, so a granted symlink cannot be
 * reached through an outside one. PATH_NOT_ALLOWED names what was refused.
 */
export async function confinePath(
  requested: string,
  allowedPaths: readonly string[],
  relativePaths: RelativePaths = "fromFirstGrant",
): Promise<ConfinedPath> {
  const asked = confineLexically(requested, allowedPaths, relativePaths);
  const roots = await realRoots(allowedPaths);
  const { real, exists } = await realPathOf(asked).catch((err: unknown) => {
    // A path through a file, a link loop, a directory this process may not read: nothing to check.
    const code = (err as { code?: string }).code ?? String(err);
    throw denied(`'${requested}' cannot be resolved (${code}), so it cannot be checked`, err);
  });
  if (!insideGrant(real, roots, allowedPaths))
    throw denied(`'${requested}' leads to '${real}', outside the granted paths`);
  return { requested: asked, real, exists };
}

async function realPathOf(asked: string): Promise<{ real: string; exists: boolean }> {
  try {
    return { real: await realpath(asked), exists: true };
  } catch (err) {
    const parent = dirname(asked);
    if (!isMissing(err) || parent === asked) throw err;
    // Not there (or a dangling symlink, which a file tool's write replaces by rename rather than
    // writes through): where it would be is its parent's real path.
    return { real: join((await realPathOf(parent)).real, basename(asked)), exists: false };
  }
}

/** The allowedPaths of the grant a call runs under, when it is of the kind the tool needs. */
export function grantedPaths(granted: { kind: string; allowedPaths?: string[] }, kind: string): string[] {
  return granted.kind === kind && granted.allowedPaths ? granted.allowedPaths : [];
}

/**
 * Checks where an open file really is (Linux: /proc/self/fd), closing the gap between the check
 * of its path and the open: a directory swapped for a symlink meanwhile is caught here. Where
 * /proc is absent the check of the path stands alone.
 */
export async function assertOpenedWithin(fd: number, allowedPaths: readonly string[]): Promise<void> {
  if (grantsAnyPath(allowedPaths)) return;
  let opened: string;
  try {
    opened = await realpath(`/proc/self/fd/${fd}`);
  } catch {
    return;
  }
  if (!insideGrant(opened, await realRoots(allowedPaths), allowedPaths))
    throw denied(`the file opened is '${opened}', outside the granted paths`);
}
