import { z } from "zod";
import { ActorEnv, memoryRecallWindow } from "../../shared/runtime/config.js";

export const BUILT_IN = ["echo", "http_fetch", "memory"] as const;

/** The tool services' environment (docs/configuration.md; the Kubernetes manifests are checked against it). */
export const ToolsEnv = ActorEnv.extend({
  TOOLS: z
    .string()
    .default(BUILT_IN.join(","))
    .transform((s) =>
      s
        .split(",")
        .map((t) => t.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.enum(BUILT_IN)).min(1))
    .describe(
      `The built-in tool services this process runs, comma-separated, among ${BUILT_IN.map((t) => `\`${t}\``).join(", ")}; workers run the ones in their \`AGENT_LOCAL_TOOLS\` themselves, and \`spawn_agent\` is always theirs.`,
    ),
  TOOLS_REDACT_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A YAML or JSON file of redaction rules (the shape of `AGENT_REDACT_FILE`), read at start: the results these services record by idempotency key are redacted by them, on top of the rules each tool declares (see docs/redaction.md). A file that cannot be read or parsed stops the process.",
    ),
  MEMORY_RECALL_WINDOW: memoryRecallWindow,
});
export type ToolsEnv = z.infer<typeof ToolsEnv>;
