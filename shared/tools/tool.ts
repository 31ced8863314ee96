import { z } from "zod";
import type { CapabilityObject, PrivacyTier, RequiredCapability } from "../contracts/capability.js";
import type { RedactionRules } from "../contracts/redaction.js";
import {
  DEFAULT_TOOL_TIMEOUT_MS,
  type Reversibility,
  type ToolApproval,
  type ToolAuditNote,
  type ToolDescriptor,
} from "../contracts/tool.js";

/** What a tool sees when it runs: who called, with which grants, and how long it has. */
export interface ToolContext {
  runId: string;
  actionId: string;
  idempotencyKey: string;
  /** The manifest's capability that granted this call (its allowlists bound what the tool may touch). */
  granted: CapabilityObject;
  privacy: PrivacyTier;
  depth: number;
  signal: AbortSignal;
  /** A human's approval of this call, when the tool asked for one (APPROVAL_REQUIRED) and got it. */
  approval?: ToolApproval;
}

export interface ToolOutput<O = unknown> {
  output: O;
  /** Progress signals: recorded by the runtime, never interpreted by it. */
  signals?: string[];
  /** The tool's own audit notes, recorded as `tool.reported` events of the calling run. */
  audit?: ToolAuditNote[];
}

/** The optional parts of a tool's result, copied only when present (the WAL stays minimal). */
export function outputExtras(
  result: Pick<ToolOutput, "signals" | "audit">,
): Pick<ToolOutput, "signals" | "audit"> {
  return {
    ...(result.signals ? { signals: result.signals } : {}),
    ...(result.audit ? { audit: result.audit } : {}),
  };
}

export interface ToolDefinition<I = unknown, O = unknown> {
  name: string;
  description: string;
  input: z.ZodType<I>;
  capability: RequiredCapability;
  timeoutMs: number;
  reversibility: Reversibility;
  idempotent: boolean;
  compensation?: { tool: string };
  /** Fields and values of its calls kept out of the run's log (see docs/redaction.md). */
  redact?: RedactionRules;
  /** The input's JSON Schema when it is known as such (a remote tool's descriptor), not derived from `input`. */
  inputSchema?: Record<string, unknown>;
  execute(input: I, ctx: ToolContext): Promise<ToolOutput<O>>;
}

/**
 * A tool of any input type, for collections. zod schemas are invariant in their type parameter,
 * so no narrower type admits every concrete tool; inputs are validated by the schema at the call.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyTool = ToolDefinition<any, unknown>;

export interface ToolInit<I, O> {
  name: string;
  description: string;
  input: z.ZodType<I>;
  capability: RequiredCapability;
  timeoutMs?: number;
  reversibility?: Reversibility;
  idempotent?: boolean;
  compensation?: { tool: string };
  redact?: RedactionRules;
  execute(input: I, ctx: ToolContext): Promise<ToolOutput<O>>;
}

/** Fills the defaults a tool may omit: 120 s timeout, pure and idempotent. */
export function defineTool<I, O>(init: ToolInit<I, O>): ToolDefinition<I, O> {
  return {
    ...init,
    timeoutMs: init.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
    reversibility: init.reversibility ?? "pure",
    idempotent: init.idempotent ?? true,
  };
}

/** The serialisable descriptor, with a JSON Schema derived from the zod input for models. */
export function describeTool(tool: AnyTool): ToolDescriptor {
  const descriptor: ToolDescriptor = {
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema ?? toJsonSchema(tool.input),
    capability: tool.capability,
    timeoutMs: tool.timeoutMs,
    reversibility: tool.reversibility,
    idempotent: tool.idempotent,
  };
  if (tool.compensation) descriptor.compensation = tool.compensation;
  if (tool.redact) descriptor.redact = tool.redact;
  return descriptor;
}

/**
 * A tool's schema converted once: every lease describes its run's tools, and converting a zod
 * schema costs more than the rest of a step's tool call. Each caller gets its own copy.
 */
const jsonSchemas = new WeakMap<z.ZodType, Record<string, unknown>>();

export function toJsonSchema(schema: z.ZodType): Record<string, unknown> {
  let json = jsonSchemas.get(schema);
  if (!json) {
    json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" });
    delete json.$schema;
    jsonSchemas.set(schema, json);
  }
  return structuredClone(json);
}
