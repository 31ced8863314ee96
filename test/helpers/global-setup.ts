import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { connect } from "@nats-io/transport-node";
import { natsServerBinary } from "../../services/local/nats-binary.js";

/**
 * Runs once before any suite. Builds `dist/` (the process-level tests run the actors from their
 * compiled entry points, exactly as production does); finds (or fetches) a nats-server new enough,
 * which the suites inherit through NATS_SERVER_BIN, and says which server the run tests against;
 * and, unless NATS_URL names a server, asks
 * once whether a Docker engine answers, so each suite knows whether it may start NATS in a
 * container (testcontainers) or must use the `nats-server` binary. The answer reaches the test
 * workers through the environment they inherit.
 */
export default async function setup(): Promise<void> {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { stdio: "inherit" });
  const say = (line: string): boolean => process.stdout.write(`${line}\n`);
  const binary = await natsServerBinary(say);
  process.env.NATS_SERVER_BIN = binary.path;
  say(`nats-server ${binary.version} at ${binary.path} (${binary.origin})`);
  if (process.env.NATS_URL) {
    const { NATS_USER: user, NATS_PASSWORD: pass = "" } = process.env;
    const nc = await connect({ servers: process.env.NATS_URL.split(","), ...(user ? { user, pass } : {}) });
    say(`NATS_URL ${process.env.NATS_URL}: nats-server v${nc.info?.version ?? "?"}`);
    await nc.close();
  }
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
