import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { RequiredCapability } from "../../shared/contracts/capability.js";
import type { Reversibility } from "../../shared/contracts/tool.js";
import { AgentError, isAgentError } from "../../shared/runtime/errors.js";
import { sanitizeOutput } from "../../shared/tools/sanitize.js";
import type { McpServerConfig } from "./config.js";

/** How the cluster sees one MCP tool: what the configuration declares, never what the server hints. */
export interface McpToolSpec {
  /** Its name on the cluster (`agents.tools.<name>`). */
  name: string;
  server: string;
  /** Its name on its server. */
  mcpName: string;
  description: string;
  inputSchema: Record<string, unknown>;
  capability: RequiredCapability;
  timeoutMs: number;
  reversibility: Reversibility;
  idempotent: boolean;
  /** Arguments holding paths, checked against the call's grant (path-arguments.ts). */
  pathArguments: string[];
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The cluster's view of a server's tool, or why it is not served (disabled, or a name the
 * cluster's subjects cannot carry). Idempotency and reversibility come from the configuration
 * only, defaulting to the safe side (not idempotent, irreversible): a server's annotations are
 * hints of a program the bridge does not trust.
 */
export function toolSpec(
  server: string,
  config: McpServerConfig,
  tool: Pick<Tool, "name" | "description" | "inputSchema">,
): McpToolSpec | { skipped: string } {
  const override = config.tools[tool.name];
  if (override?.enabled === false) return { skipped: "disabled in the configuration" };
  const name =
    override?.name ?? `${config.toolPrefix ?? `${server}_`}${tool.name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  if (!TOOL_NAME.test(name)) {
    return { skipped: `its cluster name '${name}' is not 1-64 letters, digits, '_' or '-': give it a name` };
  }
  const { $schema: _dialect, ...inputSchema } = tool.inputSchema;
  const properties = Object.keys(tool.inputSchema.properties ?? {});
  const declared = override?.paths ?? config.paths ?? [];
  const unconfinable = unconfinablePaths(tool.inputSchema, properties, declared, override?.paths);
  if (unconfinable) return { skipped: unconfinable };
  return {
    name,
    server,
    mcpName: tool.name,
    description: tool.description ?? "",
    inputSchema,
    capability: { kind: "mcp", server, tool: tool.name },
    timeoutMs: override?.timeoutMs ?? config.timeoutMs,
    reversibility: override?.reversibility ?? "irreversible",
    idempotent: override?.idempotent ?? false,
    pathArguments: declared.filter((arg) => properties.includes(arg)),
  };
}

/** Schema keywords under which an argument may hide from a look at the top-level properties. */
const COMBINATORS = ["oneOf", "anyOf", "allOf", "not", "$ref", "if"] as const;

/**
 * Why the bridge could not confine a tool's paths, if it could not: the path arguments are found
 * among the schema's top-level properties, so a schema that combines others may hold one the
 * bridge would never see, and a path argument the tool itself is declared to take must be there.
 */
function unconfinablePaths(
  schema: Record<string, unknown>,
  properties: readonly string[],
  declared: readonly string[],
  ownPaths: readonly string[] | undefined,
): string | undefined {
  if (declared.length === 0) return undefined;
  const combined = COMBINATORS.filter((k) => schema[k] !== undefined);
  if (combined.length > 0) {
    return `its input schema uses ${combined.join(", ")}: a path argument could hide there, out of the bridge's check; disable the tool or give it \`paths: []\` if it takes none`;
  }
  const missing = (ownPaths ?? []).filter((arg) => !properties.includes(arg));
  if (missing.length > 0) {
    return `its declared path argument(s) ${missing.join(", ")} are not among its input schema's properties, so the bridge could not check them: fix its \`paths\``;
  }
  return undefined;
}

/** A content part other than text, without its bytes: the run's log keeps what happened, not the data. */
type Attachment = Record<string, unknown> & { type: string };

export interface McpToolOutput {
  text: string;
  structured?: unknown;
  attachments?: Attachment[];
}

function attachment(part: CallToolResult["content"][number]): Attachment {
  switch (part.type) {
    case "image":
    case "audio":
      return { type: part.type, mimeType: part.mimeType, bytes: Math.floor((part.data.length * 3) / 4) };
    case "resource": {
      const { uri, mimeType } = part.resource;
      return { type: "resource", uri, ...(mimeType ? { mimeType } : {}) };
    }
    case "resource_link":
      return { type: "resource_link", uri: part.uri, name: part.name };
    default:
      return { type: part.type };
  }
}

const textOf = (part: CallToolResult["content"][number]): string | undefined => {
  if (part.type === "text") return part.text;
  if (part.type === "resource" && "text" in part.resource) return part.resource.text;
  return undefined;
};

/**
 * A tool result as the cluster records it: its text parts joined, sanitised of prompt-injection
 * markers and capped at `maxBytes` as every tool's output is; structured content as given; other
 * parts (images, audio, blobs) described, their bytes left out.
 */
export function toolOutput(result: CallToolResult, maxBytes: number): McpToolOutput {
  const texts = result.content.flatMap((part) => textOf(part) ?? []);
  const attachments = result.content.filter((part) => part.type !== "text").map(attachment);
  return {
    text: sanitizeOutput(texts.join("\n"), maxBytes).text,
    ...(result.structuredContent ? { structured: result.structuredContent } : {}),
    ...(attachments.length > 0 ? { attachments } : {}),
  };
}

/** A result the server flagged as an error: the tool ran and failed (its text says why). */
export function toolFailure(result: CallToolResult, tool: string, maxBytes: number): AgentError {
  const text = toolOutput(result, maxBytes).text || "no message";
  return new AgentError("TOOL_FAILED", `MCP tool '${tool}' failed: ${text}`);
}

/**
 * A call's protocol failure in the runtime's codes. A connection lost mid-call leaves the
 * outcome unknown: a timeout, for a tool that is not idempotent (the caller reconciles it from
 * the record), or unavailable (asked again) for one that is.
 */
export function callError(err: unknown, tool: string, idempotent: boolean): AgentError {
  if (isAgentError(err)) return err;
  if (!(err instanceof McpError)) return new AgentError("TOOL_FAILED", String(err), { cause: err });
  const message = `MCP tool '${tool}': ${err.message}`;
  switch (err.code as ErrorCode) {
    case ErrorCode.InvalidParams:
      return new AgentError("INVALID_INPUT", message, { cause: err });
    case ErrorCode.MethodNotFound:
      return new AgentError("UNKNOWN_TOOL", message, { cause: err });
    case ErrorCode.RequestTimeout:
      return new AgentError("TOOL_TIMEOUT", message, { cause: err });
    case ErrorCode.ConnectionClosed:
      return idempotent
        ? new AgentError("TOOL_UNAVAILABLE", `${message} (its server went away; ask again)`, { cause: err })
        : new AgentError("TOOL_TIMEOUT", `${message} (its server went away mid-call: outcome unknown)`, {
            cause: err,
          });
    default:
      return new AgentError("TOOL_FAILED", message, { cause: err });
  }
}
