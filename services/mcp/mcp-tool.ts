import { Ajv } from "ajv";
import { z } from "zod";
import type { RedactionRules } from "../../shared/contracts/redaction.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { findGrant } from "../../shared/tools/capabilities.js";
import type { AnyTool } from "../../shared/tools/tool.js";
import { callError, toolFailure, toolOutput, type McpToolSpec } from "./mapping.js";
import { confinePaths, type PathResolution } from "./path-arguments.js";
import type { McpServerLink } from "./server-link.js";

// Formats and keywords a server's schema may use without ajv knowing them are not checked here:
// the server checks its own input too.
const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false, logger: false });

const Arguments = z.record(z.string(), z.unknown());

/**
 * The input a tool accepts: an object valid against the server's JSON Schema. A schema ajv cannot
 * compile is left to the server to enforce.
 */
export function inputOf(schema: Record<string, unknown>): z.ZodType<Record<string, unknown>> {
  let validate: ReturnType<typeof ajv.compile>;
  try {
    validate = ajv.compile(schema);
  } catch {
    return Arguments;
  }
  return Arguments.superRefine((value, ctx) => {
    if (!validate(value)) ctx.addIssue({ code: "custom", message: ajv.errorsText(validate.errors) });
  });
}

export interface McpToolDeps {
  link: McpServerLink;
  /** How a path argument is resolved before it is checked (path-arguments.ts). */
  resolution: PathResolution;
  maxOutputBytes: number;
  /** The configuration's redaction rules for the tool: its descriptor's `redact`. */
  redact?: RedactionRules;
}

/**
 * An MCP server's tool as a tool of the cluster: its path arguments confined to the call's grant
 * before the server sees them, the call made on the server's link within the tool's timeout, and
 * the result turned into a sanitised output, or into an error with the runtime's codes.
 */
export function mcpTool(spec: McpToolSpec, deps: McpToolDeps): AnyTool {
  return {
    name: spec.name,
    description: spec.description,
    input: inputOf(spec.inputSchema),
    inputSchema: spec.inputSchema,
    capability: spec.capability,
    timeoutMs: spec.timeoutMs,
    reversibility: spec.reversibility,
    idempotent: spec.idempotent,
    ...(deps.redact ? { redact: deps.redact } : {}),
    execute: async (input: Record<string, unknown>, ctx) => {
      // The worker checked the grant; checked again here, where the server is one step away.
      if (ctx.granted.kind !== "mcp" || !findGrant([ctx.granted], spec.capability)) {
        throw new AgentError(
          "CAPABILITY_DENIED",
          `tool '${spec.name}' needs the grant mcp{server: '${spec.server}', tool: '${spec.mcpName}'}`,
        );
      }
      const args = await confinePaths(input, {
        tool: spec.name,
        pathArguments: spec.pathArguments,
        allowedPaths: ctx.granted.allowedPaths,
        resolution: deps.resolution,
      });
      const result = await deps.link
        .call(spec.mcpName, args, { signal: ctx.signal, timeoutMs: spec.timeoutMs })
        .catch((err: unknown) => {
          throw callError(err, spec.name, spec.idempotent);
        });
      if (result.isError) throw toolFailure(result, spec.name, deps.maxOutputBytes);
      return { output: toolOutput(result, deps.maxOutputBytes) };
    },
  };
}
