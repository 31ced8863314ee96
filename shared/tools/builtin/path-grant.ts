import { realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { AgentError } from "../../runtime/errors.js";

/**
 * Confinement of the file tools (and the shell tool's working directory) to a grant's
 * `allowedPaths`: directories (or single files) given as absolute paths, `"*"` for any path.
 * The lexical part is pure; `confinePath` resolves symlinks and checks where they lead.
 */

/** Whether `path` is `root` itself or lies below it; both absolute and normalised. */
export function isWithin(root: string, path: string): boolean {
  if (root === path) return true;
  const rel = relative(root, path);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}

/** Whether the pattern list grants every path. */
export const grantsAnyPath = (allowedPaths: readonly string[]): boolean => allowedPaths.includes("*");

const denied = (message: string): AgentError => new AgentError("PATH_NOT_ALLOWED", message);

/**
 * The absolute, normalised path a request names, before any symlink is followed: a relative path
 * is taken from the grant's first directory. A NUL byte, an empty path, or a relative path with
 * no granted directory to start from is refused. Pure.
 */
export function requestedPath(requested: string, allowedPaths: readonly string[]): string {
  if (requested.length === 0 || requested.includes("\0"))
    throw denied("the path is empty or holds a NUL byte");
  if (isAbsolute(requested)) return resolve(requested);
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
  /** Where it really is: every symlink followed (for a path not yet existing: its parent's). */
  real: string;
  exists: boolean;
}

/**
 * Resolves a requested path and checks it against the grant: symlinks are followed and the target
 * checked, a `..` counts only where it lands, and for a path that does not exist yet its parent's
 * real path is checked (so a symlinked parent cannot lead a new file outside). The lexical path
 * must be inside the grant too, so a granted symlink cannot be reached through an outside one.
 * PATH_NOT_ALLOWED names what was refused; NOT_FOUND when the parent does not exist.
 */
export async function confinePath(requested: string, allowedPaths: readonly string[]): Promise<ConfinedPath> {
  const asked = requestedPath(requested, allowedPaths);
  if (!insideGrant(asked, lexicalRoots(allowedPaths), allowedPaths))
    throw denied(`'${requested}' is outside the granted paths`);
  const roots = await realRoots(allowedPaths);
  const { real, exists } = await realPathOf(asked);
  if (!insideGrant(real, roots, allowedPaths))
    throw denied(`'${requested}' leads to '${real}', outside the granted paths`);
  return { requested: asked, real, exists };
}

async function realPathOf(asked: string): Promise<{ real: string; exists: boolean }> {
  try {
    return { real: await realpath(asked), exists: true };
  } catch (err) {
    if (!isMissing(err)) throw err;
  }
  // Not there (or a dangling symlink, which a write replaces by rename rather than writes through):
  // where it would be is its parent's real path.
  const parent = await realpath(dirname(asked)).catch((err: unknown) => {
    if (isMissing(err)) throw new AgentError("NOT_FOUND", `directory '${dirname(asked)}' does not exist`);
    throw err;
  });
  return { real: join(parent, basename(asked)), exists: false };
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
