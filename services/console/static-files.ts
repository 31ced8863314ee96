/**
 * The page's files (plain HTML, CSS and JavaScript, no build step), read once at start from
 * services/console/static in the repository or the image, and served by exact name only.
 */
import { readdir, readFile } from "node:fs/promises";
import { extname, join, relative } from "node:path";
import { repoRoot } from "../local/paths.js";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".svg": "image/svg+xml",
};

export interface StaticFile {
  type: string;
  body: Uint8Array;
}

/** The static directory's files by URL path (`/index.html`, `/views/run.js`…). */
export async function loadStaticFiles(
  dir = join(repoRoot(), "services", "console", "static"),
): Promise<Map<string, StaticFile>> {
  const files = new Map<string, StaticFile>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const type = TYPES[extname(entry.name)];
    if (!entry.isFile() || !type) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(`/${relative(dir, path).split("\\").join("/")}`, { type, body: await readFile(path) });
  }
  return files;
}
