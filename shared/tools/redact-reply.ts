import type { RedactionConfig } from "../contracts/redaction.js";
import type { ToolCallReply } from "../contracts/tool.js";
import { compileRules, configuredRules, redactField } from "./redaction.js";
import type { AnyTool } from "./tool.js";

/**
 * A tool's reply as its service records it under the call's idempotency key and answers it: its
 * output redacted by the tool's own rules and the operators' (TOOLS_REDACT_FILE, MCP_REDACT_FILE),
 * its error's message by their patterns. The same answer live and from the record, so a worker
 * taking a run over goes on as the first answer would have. Pure.
 */
export function recordedReply(
  tool: Pick<AnyTool, "name" | "redact">,
  config: RedactionConfig | undefined,
  reply: ToolCallReply,
): ToolCallReply {
  const rules = compileRules(tool.redact, ...configuredRules(config, tool.name));
  if (!rules) return reply;
  if (reply.ok) return { ...reply, output: redactField(reply.output, "output", rules).value };
  const message = redactField(reply.error.message, "output", { paths: [], patterns: rules.patterns });
  return { ...reply, error: { ...reply.error, message: message.value as string } };
}
