import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The repository (or image) root, found by walking up to package.json: the same answer whether
 * this runs compiled from `dist/` or as TypeScript source under the test runner.
 */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = resolve(dir, "..");
    if (parent === dir) throw new Error("cannot find the repository root (no package.json above)");
    dir = parent;
  }
  return dir;
}

/** The compiled entry point of an actor (what a container runs). */
export function compiledEntry(kind: string): string {
  return join(repoRoot(), "dist", "services", kind, "main.js");
}
