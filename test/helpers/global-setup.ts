import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

/**
 * Runs once before any suite. Builds `dist/` (the process-level tests run the actors from their
 * compiled entry points, exactly as production does), and, unless NATS_URL names a server, asks
 * once whether a Docker engine answers, so each suite knows whether it may start NATS in a
 * container (testcontainers) or must use the `nats-server` binary. The answer reaches the test
 * workers through the environment they inherit.
 */
export default async function setup(): Promise<void> {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { stdio: "inherit" });
  if (process.env.NATS_URL || process.env.TEST_NATS_CONTAINER) return;
  try {
    // Imported lazily: without an engine this fails in well under a second on Node 24.
    const { getContainerRuntimeClient } = await import("testcontainers");
    await getContainerRuntimeClient();
    process.env.TEST_NATS_CONTAINER = "1";
  } catch {
    process.env.TEST_NATS_CONTAINER = "0";
    process.stdout.write("no Docker engine answers: suites start the nats-server binary instead\n");
  }
}
