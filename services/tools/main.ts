/**
 * The built-in tool services: `npm run actor -- tools`. Each tool is its own NATS service on
 * `<prefix>.tools.<name>` (a queue group: run as many replicas as the load needs). TOOLS picks
 * which to serve. (`spawn_agent` is not among them: agent workers perform it themselves, parking the
 * parent run instead of holding a worker while the children run.) Workers run the tools in their
 * AGENT_LOCAL_TOOLS in-process (echo and memory by default): these serve the workers that do not.
 */
import { onShutdown, openActorBus, startActorHealth } from "../../shared/bus/actor.js";
import { KvMemory, memoryReads } from "../../shared/bus/kv-memory.js";
import { serveToolsOf } from "../../shared/bus/tool-service.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { parseEnv } from "../../shared/runtime/config.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { startTracing } from "../../shared/runtime/tracing-sdk.js";
import { exitOnFatal } from "../../shared/runtime/fatal.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { createFileListTool } from "../../shared/tools/builtin/file-list.js";
import { createFileReadTool } from "../../shared/tools/builtin/file-read.js";
import { createFileWriteTool } from "../../shared/tools/builtin/file-write.js";
import { secretFilesOf } from "../../shared/tools/builtin/protected-paths.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { httpFetchTool } from "../../shared/tools/builtin/http-fetch.js";
import { createMemoryTool } from "../../shared/tools/builtin/memory.js";
import { createShellTool, shellIdentity } from "../../shared/tools/builtin/shell.js";
import { probePidNamespace } from "../../shared/tools/builtin/pid-namespace.js";
import type { AnyTool } from "../../shared/tools/tool.js";
import { loadRedactionConfig } from "../../shared/tools/redaction-config.js";
import { type BUILT_IN, ToolsEnv } from "./env.js";

const fatal = exitOnFatal(createLogger({ actor: "tools" }));
const env = parseEnv(ToolsEnv, process.env);
const redaction = loadRedactionConfig("TOOLS_REDACT_FILE", env.TOOLS_REDACT_FILE);
const logger = createLogger({ actor: "tools", level: env.LOG_LEVEL });
fatal.use(logger);
const self = process.getuid && process.getgid ? { uid: process.getuid(), gid: process.getgid() } : undefined;
// Checked before connecting: a uid this process cannot run commands as stops it at start.
const identity = env.TOOLS.includes("shell")
  ? shellIdentity({ uid: env.TOOLS_SHELL_UID, gid: env.TOOLS_SHELL_GID }, self, env.TOOLS_SHELL_SAME_USER)
  : undefined;
const tracing = await startTracing(env, "tools", logger);
const namespace = identity ? await probePidNamespace(identity) : undefined;
if (namespace && "unavailable" in namespace)
  logger.warn(
    { reason: namespace.unavailable },
    "shell commands run without a PID namespace: what a command detaches (setsid, a daemon) can outlive its call and this actor; install util-linux and allow unshare (CAP_SYS_ADMIN) to close that",
  );
const pidNamespace = namespace && !("unavailable" in namespace) ? namespace : undefined;
const bus = await openActorBus(env, "tools", { clock: systemClock, random: systemRandom, logger, fatal });
const metrics = new ActorMetrics("tools");
const files = { secretFiles: secretFilesOf(env) };
const available: Record<(typeof BUILT_IN)[number], () => AnyTool> = {
  echo: () => echoTool,
  file_list: () => createFileListTool(files),
  file_read: () => createFileReadTool(files),
  file_write: () => createFileWriteTool({ ...files, ids: uuidIds }),
  http_fetch: () => httpFetchTool,
  memory: () =>
    createMemoryTool(
      new KvMemory(bus.buckets.memory, systemClock, memoryReads(bus, env.MEMORY_RECALL_WINDOW)),
    ),
  shell: () =>
    createShellTool({
      roots: env.TOOLS_SHELL_ROOTS,
      maxTimeoutMs: env.TOOLS_SHELL_TIMEOUT_MS,
      ...(identity ? { identity } : {}),
      ...(pidNamespace ? { pidNamespace } : {}),
    }),
};
const served = serveToolsOf(
  env.TOOLS.map((name) => available[name]()),
  bus,
  { logger, metrics, ...(redaction ? { redaction } : {}) },
);
const health = await startActorHealth(bus, env, metrics);
logger.info(
  { tools: env.TOOLS, shellIdentity: identity, pidNamespace: Boolean(pidNamespace), healthPort: health.port },
  "tool services ready",
);
onShutdown(logger, async () => {
  await health.close();
  await served.stop();
  await bus.nc.drain();
  await tracing.shutdown();
});
