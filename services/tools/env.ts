import { z } from "zod";
import { ActorEnv, memoryRecallWindow } from "../../shared/runtime/config.js";

export const BUILT_IN = ["echo", "http_fetch", "memory"] as const;

/** The tool services' environment (docs/running-a-cluster.md's table; the Kubernetes manifests are checked against it). */
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
    .pipe(z.array(z.enum(BUILT_IN)).min(1)),
  MEMORY_RECALL_WINDOW: memoryRecallWindow,
});
export type ToolsEnv = z.infer<typeof ToolsEnv>;
