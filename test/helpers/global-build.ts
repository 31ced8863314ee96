import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

/**
 * The process-level tests run the actors from their compiled entry points, exactly as
 * production does: build once before any suite starts.
 */
export default function setup(): void {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { stdio: "inherit" });
}
