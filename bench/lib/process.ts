import type { ChildProcess } from "node:child_process";
import { readdir, stat } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";

/** A free TCP port on loopback (the OS picks it; there is a small race until the caller binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The first line a child prints on stdout. */
export function waitForLine(child: ChildProcess, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(
      () => reject(new Error(`no line from pid ${child.pid} in ${timeoutMs} ms`)),
      timeoutMs,
    );
    child.stdout?.on("data", (chunk: Buffer) => {
      seen += chunk.toString();
      const end = seen.indexOf("\n");
      if (end >= 0) {
        clearTimeout(timer);
        resolve(seen.slice(0, end));
      }
    });
    child.once("exit", (code) =>
      reject(new Error(`pid ${child.pid} exited (${String(code)}) before a line`)),
    );
  });
}

/** Polls `check` until it returns true (errors count as not yet). */
export async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Total size of the files under a directory. */
export async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    total += await stat(join(entry.parentPath, entry.name)).then(
      (s) => s.size,
      () => 0,
    );
  }
  return total;
}
