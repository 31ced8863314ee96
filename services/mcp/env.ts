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
  MCP_REDACT_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A YAML or JSON file of redaction rules (the shape of `AGENT_REDACT_FILE`), read at start: what the bridge's tools answer and record by idempotency key is redacted by them, on top of each tool's own `redact` in the servers file (see docs/redaction.md). A file that cannot be read or parsed stops the process.",
    ),
});
export type McpEnv = z.infer<typeof McpEnv>;
