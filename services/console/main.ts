/**
 * The web console: `npm run actor -- console`. A page and a JSON + SSE API over the run log, the
 * status bucket and the control subjects (docs/console.md). Stateless: replicas are interchangeable.
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { onShutdown, openActorBus, startActorHealth } from "../../shared/bus/actor.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { parseEnv } from "../../shared/runtime/config.js";
import { exitOnFatal } from "../../shared/runtime/fatal.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { ClusterClient } from "../cli/client.js";
import { checkBinding } from "./access.js";
import { consoleApp } from "./app.js";
import { ConsoleEnv } from "./env.js";
import { FeedLimit } from "./feed-limit.js";
import { ConsoleReads } from "./reads.js";
import { loadStaticFiles } from "./static-files.js";

const fatal = exitOnFatal(createLogger({ actor: "console" }));
const env = parseEnv(ConsoleEnv, process.env);
const access = {
  token: env.CONSOLE_TOKEN,
  operateToken: env.CONSOLE_OPERATE_TOKEN,
  allowedHosts: env.CONSOLE_ALLOWED_HOSTS,
};
// Before anything connects: a console open to the network without a token never starts.
checkBinding(env.CONSOLE_HOST, access);
const logger = createLogger({ actor: "console", level: env.LOG_LEVEL });
fatal.use(logger);
const files = await loadStaticFiles();
const bus = await openActorBus(env, "console", { clock: systemClock, random: systemRandom, logger, fatal });
const wait = { waitMs: 10_000, clock: systemClock, random: systemRandom, onWait: () => undefined };
const app = consoleApp({
  bus,
  reads: new ConsoleReads(bus, { replicas: env.AGENTS_REPLICAS, listenMs: env.CONSOLE_CLUSTER_LISTEN_MS }),
  client: new ClusterClient(bus, wait),
  access,
  files,
  feeds: new FeedLimit(env.CONSOLE_MAX_FEEDS),
});
const server = serve({ fetch: app.fetch, port: env.CONSOLE_PORT, hostname: env.CONSOLE_HOST });
const address = await new Promise<AddressInfo>((resolve, reject) => {
  server.once("listening", () => resolve(server.address() as AddressInfo));
  server.once("error", reject);
});
const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
const url = `http://${host}:${address.port}/`;
const health = await startActorHealth(bus, env, new ActorMetrics("console"));
logger.info(
  {
    url,
    healthPort: health.port,
    auth: access.token !== undefined,
    operate: access.operateToken !== undefined,
  },
  "console ready",
);
onShutdown(logger, async () => {
  await health.close();
  // Live feeds hold their connections open: closing them lets the server close.
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  if ("closeAllConnections" in server) server.closeAllConnections();
  await closed;
  await bus.nc.drain();
});
