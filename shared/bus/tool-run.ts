import type { RedactionConfig } from "../contracts/redaction.js";
import type { ToolCallReply, ToolCallRequest } from "../contracts/tool.js";
import { type AgentError, toAgentError } from "../runtime/errors.js";
import type { ActorMetrics } from "../runtime/metrics.js";
import { callGrant } from "../tools/capabilities.js";
import type { ToolInvoker } from "../tools/invoke.js";
import { recordedReply } from "../tools/redact-reply.js";
import { outputExtras, type AnyTool } from "../tools/tool.js";
import { storageFull } from "./storage-full.js";

/** What running one call of a served tool takes. */
export interface ToolRunDeps {
  invoker: ToolInvoker;
  /** Times each run of the tool, when given. */
  metrics?: ActorMetrics;
  /** The operators' redaction rules for what is answered and recorded, on top of the tool's own. */
  redaction?: RedactionConfig;
}

/** A failed call's reply. */
export const failure = (error: AgentError): ToolCallReply => ({ ok: false, error: error.toBody() });

/**
 * Runs one call of a served tool under the grant it carries, its reply redacted once: the caller
 * is answered with what the service records, so a repeated key gets the same answer.
 */
export async function answered(
  tool: AnyTool,
  deps: ToolRunDeps,
  request: ToolCallRequest,
): Promise<ToolCallReply> {
  return recordedReply(tool, deps.redaction, await run(tool, deps, request));
}

async function run(tool: AnyTool, deps: ToolRunDeps, request: ToolCallRequest): Promise<ToolCallReply> {
  const timed = deps.metrics?.phaseSeconds.startTimer({ phase: `tool:${tool.name}` });
  try {
    const granted = callGrant(tool, request.grant);
    const result = await deps.invoker.invoke(tool, request.input, {
      runId: request.runId,
      actionId: request.actionId,
      idempotencyKey: request.idempotencyKey,
      granted,
      privacy: request.privacy ?? "sovereign",
      depth: request.depth ?? 0,
      ...(request.approval ? { approval: request.approval } : {}),
    });
    return { ok: true, output: result.output, ...outputExtras(result) };
  } catch (err) {
    // A tool writing to this cluster's JetStream (memory) that found no room: the bus, not the tool.
    return failure(storageFull(`tool '${tool.name}'`, err) ?? toAgentError(err, "TOOL_FAILED"));
  } finally {
    timed?.();
  }
}
