import { isAbsolute } from "node:path";
import { z } from "zod";
import { ActorEnv, memoryRecallWindow, whole } from "../../shared/runtime/config.js";
import { BUILT_IN_TOOLS } from "../../shared/tools/builtin/built-ins.js";
import { DEFAULT_COMMAND_TIMEOUT_MS } from "../../shared/tools/builtin/shell.js";

/** What a tools actor serves: every built-in tool but `spawn_agent`, which workers perform themselves. */
const ServedTool = z.enum(BUILT_IN_TOOLS).exclude(["spawn_agent"]);
export const BUILT_IN = ServedTool.options;
/** Served when TOOLS is unset: the tools that touch neither this machine's files nor its programs. */
const DEFAULT_TOOLS = ["echo", "http_fetch", "memory"];

const commaList = z.string().transform((s) =>
  s
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean),
);
const uid = z.coerce
  .number()
  .int()
  .min(0)
  .max(2 ** 31 - 1);

/** The tool services' environment (docs/configuration.md; the Kubernetes manifests are checked against it). */
export const ToolsEnv = ActorEnv.extend({
  TOOLS: z
    .string()
    .default(DEFAULT_TOOLS.join(","))
    .pipe(commaList)
    .pipe(z.array(ServedTool).min(1))
    .describe(
      `The built-in tool services this process runs, comma-separated, among ${BUILT_IN.map((t) => `\`${t}\``).join(", ")}; workers run the ones in their \`AGENT_LOCAL_TOOLS\` themselves, and \`spawn_agent\` is always theirs. The file tools and \`shell\` are served only when named (docs/tools-security.md).`,
    ),
  TOOLS_SHELL_ROOTS: z
    .string()
    .default("")
    .pipe(commaList)
    .pipe(z.array(z.string().refine((dir) => isAbsolute(dir), "an absolute directory")))
    .describe(
      "The directories the `shell` tool's commands may run in, comma-separated absolute paths: a call's `cwd` must resolve (symlinks followed) inside one, and the first is the default. Required when `TOOLS` names `shell`.",
    ),
  TOOLS_SHELL_UID: uid
    .optional()
    .describe(
      "The user id `shell` commands run as when the tools actor runs as root; unset: 65534 (`nobody`), so a command has no more rights than any user. A tools actor not running as root would run commands as itself: it refuses another id, and starts only with `TOOLS_SHELL_SAME_USER=true`.",
    ),
  TOOLS_SHELL_GID: uid
    .optional()
    .describe(
      "The group id `shell` commands run as when the tools actor runs as root; unset: 65534 (`nogroup`).",
    ),
  TOOLS_SHELL_SAME_USER: z
    .enum(["true", "false"])
    .default("false")
    .transform((v) => v === "true")
    .describe(
      "`true` lets `shell` run commands as the tools actor's own user (a tools actor not running as root, or `TOOLS_SHELL_UID=0`), accepting that a granted program can then read the actor's credentials: its environment in `/proc` (`NATS_PASSWORD`) and its key files. Unset or `false`: such a tools actor refuses to start when `TOOLS` names `shell`.",
    ),
  TOOLS_SHELL_TIMEOUT_MS: whole(100, 3_600_000, DEFAULT_COMMAND_TIMEOUT_MS).describe(
    "The longest, in milliseconds, a `shell` command may run (a call may ask for less) before its whole process group is killed and the call fails.",
  ),
  TOOLS_REDACT_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A YAML or JSON file of redaction rules (the shape of `AGENT_REDACT_FILE`), read at start: the results these services record by idempotency key are redacted by them, on top of the rules each tool declares (see docs/redaction.md). A file that cannot be read or parsed stops the process.",
    ),
  MEMORY_RECALL_WINDOW: memoryRecallWindow,
}).refine((env) => !env.TOOLS.includes("shell") || env.TOOLS_SHELL_ROOTS.length > 0, {
  message: "TOOLS names `shell`: set TOOLS_SHELL_ROOTS to the directories its commands may run in",
  path: ["TOOLS_SHELL_ROOTS"],
});
export type ToolsEnv = z.infer<typeof ToolsEnv>;
