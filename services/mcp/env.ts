import { z } from "zod";
import { ActorEnv, whole } from "../../shared/runtime/config.js";
import { DEFAULT_MAX_OUTPUT_BYTES } from "../../shared/tools/sanitize.js";

/** The MCP bridge's environment (docs/configuration.md; docs/mcp.md describes its servers file). */
export const McpEnv = ActorEnv.extend({
  MCP_SERVERS_FILE: z
    .string()
    .min(1)
    .describe(
      "The MCP servers the bridge serves as tools, a YAML or JSON file: each server's command and arguments (stdio) or URL (streamable HTTP), its environment, and per-tool overrides ([MCP servers as tools](mcp.md)). Required.",
    ),
  MCP_MAX_OUTPUT_BYTES: whole(1_024, 1_048_576, DEFAULT_MAX_OUTPUT_BYTES).describe(
    "The most bytes of text an MCP tool's result keeps (sanitised of prompt-injection markers, the rest cut); images, audio and blobs are described, never copied into the run's log.",
  ),
});
export type McpEnv = z.infer<typeof McpEnv>;
