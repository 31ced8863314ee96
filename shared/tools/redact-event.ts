import type { LoopEvent } from "../contracts/loop-event.js";
import type { RedactionConfig, RedactionNote } from "../contracts/redaction.js";
import type { ToolDescriptor } from "../contracts/tool.js";
import { compileRules, configuredRules, fired, redactField, type CompiledRules } from "./redaction.js";

/** The redaction rules of each tool a run may call: its descriptor's and the operators'. */
export interface RedactionPolicy {
  rulesFor(tool: string): CompiledRules | undefined;
}

/** A policy from the tools' descriptors and the operators' file; rules are compiled once per tool. */
export function redactionPolicy(
  tools: readonly Pick<ToolDescriptor, "name" | "redact">[],
  config?: RedactionConfig,
): RedactionPolicy {
  const compiled = new Map<string, CompiledRules | undefined>();
  return {
    rulesFor(tool) {
      if (!compiled.has(tool)) {
        const own = tools.find((t) => t.name === tool)?.redact;
        compiled.set(tool, compileRules(own, ...configuredRules(config, tool)));
      }
      return compiled.get(tool);
    },
  };
}

/** An event as the run's log and loop may see it, and the inputs it held, by the model's call id. */
export interface RedactedEvent {
  event: LoopEvent;
  /** The tool inputs the redaction changed: only the worker that sends the calls keeps them. */
  originals: Map<string, unknown>;
}

/**
 * An event from outside the loop without the notes of what was redacted from it: only the
 * worker's redaction says what it took out (a job could carry notes of its own, to skip it or to
 * forge `tool.redacted` records). Pure.
 */
export function withoutNotes(event: LoopEvent): LoopEvent {
  if (!("redactions" in event) || event.redactions === undefined) return event;
  const { redactions: _given, ...rest } = event;
  return rest;
}

/**
 * An event from outside the loop with its tool calls' redacted fields taken out, before the loop
 * sees it and so before the log records it: a model's tool calls (their inputs), a tool's output,
 * a tool's error message. `toolOf` names the tool of an action. Pure.
 */
export function redactEvent(
  event: LoopEvent,
  policy: RedactionPolicy,
  toolOf: (actionId: string) => string | undefined,
): RedactedEvent {
  const originals = new Map<string, unknown>();
  if (event.type === "modelResponded") {
    const notes: RedactionNote[] = [];
    const toolCalls = event.response.toolCalls.map((call) => {
      const rules = policy.rulesFor(call.name);
      if (!rules) return call;
      const r = redactField(call.input, "input", rules);
      if (!fired(r)) return call;
      originals.set(call.id, call.input);
      notes.push({ tool: call.name, field: "input", callId: call.id, paths: r.paths, patterns: r.patterns });
      return { ...call, input: r.value };
    });
    if (notes.length === 0) return { event, originals };
    return { event: { ...event, response: { ...event.response, toolCalls }, redactions: notes }, originals };
  }
  if (event.type !== "toolCompleted" && event.type !== "toolAborted") return { event, originals };
  const tool = toolOf(event.actionId);
  const rules = tool === undefined ? undefined : policy.rulesFor(tool);
  if (tool === undefined || !rules) return { event, originals };
  const note = (r: { paths: string[]; patterns: string[] }): RedactionNote[] => [
    { tool, field: "output", actionId: event.actionId, paths: r.paths, patterns: r.patterns },
  ];
  if (event.type === "toolCompleted") {
    const r = redactField(event.output, "output", rules);
    if (!fired(r)) return { event, originals };
    return { event: { ...event, output: r.value, redactions: note(r) }, originals };
  }
  // An error's message and details (an approval's reason) may quote what the tool was given: the
  // patterns apply to them (paths do not).
  const { message, details } = event.error;
  const r = redactField({ message, details }, "output", { paths: [], patterns: rules.patterns });
  if (!fired(r)) return { event, originals };
  const error = { ...event.error, ...(r.value as { message: string; details?: unknown }) };
  return { event: { ...event, error, redactions: note(r) }, originals };
}

/**
 * A settlement of the call a halted run waited on, its output redacted as the call's own would
 * be: a human's (`resume --settle ran --output …`) or what a cancel learned from the tool's service.
 * `waited`: that call. The notes are computed here, never taken from the event (a job's). Pure.
 */
export function redactSettlement(
  event: LoopEvent,
  policy: RedactionPolicy,
  waited: { tool: string; actionId: string } | undefined,
): LoopEvent {
  if (event.type !== "resume" && event.type !== "cancel") return event;
  const rules = waited ? policy.rulesFor(waited.tool) : undefined;
  if (!waited || !rules) return event;
  const redact = (output: unknown): { value: unknown; redactions: RedactionNote[] } | undefined => {
    const r = redactField(output, "output", rules);
    if (!fired(r)) return undefined;
    const { tool, actionId } = waited;
    return {
      value: r.value,
      redactions: [{ tool, field: "output", actionId, paths: r.paths, patterns: r.patterns }],
    };
  };
  if (event.type === "resume") {
    const r = event.settle?.decision === "ran" ? redact(event.settle.output) : undefined;
    return r ? { ...event, settle: { decision: "ran", output: r.value }, redactions: r.redactions } : event;
  }
  const waitedOn = event.waitedOn;
  const r = waitedOn?.outcome === "completed" ? redact(waitedOn.output) : undefined;
  if (!r || waitedOn?.outcome !== "completed") return event;
  return { ...event, waitedOn: { ...waitedOn, output: r.value }, redactions: r.redactions };
}
