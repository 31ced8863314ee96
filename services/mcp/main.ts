/**
 * The MCP bridge: `npm run actor -- mcp`. Connects to the MCP servers MCP_SERVERS_FILE names
 * (stdio or streamable HTTP) and serves each of their tools as a tool service on
 * `<prefix>.tools.<name>`, as the built-in tool services are (docs/mcp.md).
 */
import { onShutdown, openActorBus, startActorHealth } from "../../shared/bus/actor.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { parseEnv } from "../../shared/runtime/config.js";
import { exitOnFatal } from "../../shared/runtime/fatal.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { ToolInvoker } from "../../shared/tools/invoke.js";
import { loadRedactionConfig } from "../../shared/tools/redaction-config.js";
import { McpBridge } from "./bridge.js";
import { readServersFile } from "./config.js";
import { McpEnv } from "./env.js";

const fatal = exitOnFatal(createLogger({ actor: "mcp" }));
const env = parseEnv(McpEnv, process.env);
const logger = createLogger({ actor: "mcp", level: env.LOG_LEVEL });
fatal.use(logger);
const servers = await readServersFile(env.MCP_SERVERS_FILE);
const redaction = loadRedactionConfig("MCP_REDACT_FILE", env.MCP_REDACT_FILE);
const bus = await openActorBus(env, "mcp", { clock: systemClock, random: systemRandom, logger, fatal });
const metrics = new ActorMetrics("mcp");
const bridge = new McpBridge(servers, {
  service: {
    nc: bus.nc,
    subjects: bus.subjects,
    idempotency: bus.buckets.idempotency,
    // The worker retries: each call runs once here, and its outcome is recorded.
    invoker: new ToolInvoker({ clock: systemClock, random: systemRandom, policy: { retries: 0 } }),
    clock: systemClock,
    random: systemRandom,
    logger,
    metrics,
    ...(redaction ? { redaction } : {}),
  },
  env: process.env,
  maxOutputBytes: env.MCP_MAX_OUTPUT_BYTES,
});
await bridge.start();
const health = await startActorHealth(bus, env, metrics);
logger.info(
  { servers: bridge.connected(), tools: bridge.tools(), healthPort: health.port },
  "mcp bridge ready",
);
onShutdown(logger, async () => {
  await health.close();
  await bridge.stop();
  await bus.nc.drain();
});
