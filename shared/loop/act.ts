import type { ModelResponse, ToolCall } from "../contracts/model.js";
import type { ToolApproval } from "../contracts/tool.js";
import { sanitizeOutput } from "../tools/sanitize.js";
import { authorizeTool } from "../tools/capabilities.js";
import { canonicalJson } from "../runtime/canonical-json.js";
import { isAgentError } from "../runtime/errors.js";
import { contentHash } from "../runtime/hash.js";
import { batchable, nextInBatch } from "./act-batch.js";
import { descriptorOf, idempotencyKeyFor, logAction, type LoggedAction } from "./action.js";
import { completedAction, SPAWN_AGENT_TOOL, spawnAction } from "./saga.js";
import { checkToolCall, recordCost, recordStopReason, recordUsage } from "./guard.js";
import type { Draft } from "./draft.js";
import { convergedNow, requestModel, sampleCount } from "./model-step.js";
import { finishAnswer, onSample, proposalOf } from "./samples.js";
import { FINISH_TOOL, INVOCATION_LIMIT, type LoopConfig } from "./state.js";
import { fail } from "./terminal.js";
import { enterVerify } from "./verify.js";

/** A response is audited, settles the model call, and adds to the run's steps and usage. */
export function tallyResponse(d: Draft, response: ModelResponse): void {
  const s = d.state;
  d.audit("model.responded", "passed", {
    data: {
      stopReason: response.stopReason,
      usage: response.usage,
      costUsd: response.costUsd,
      toolCalls: response.toolCalls.map((c) => c.name),
    },
  });
  d.settle();
  s.step += 1;
  s.modelId = response.model;
  s.usage = {
    ...s.usage,
    inputTokens: s.usage.inputTokens + response.usage.inputTokens,
    outputTokens: s.usage.outputTokens + response.usage.outputTokens,
    costUsd: s.usage.costUsd + response.costUsd,
    modelCalls: s.usage.modelCalls + 1,
  };
}

/** A model answered: account for it, let guard and policy speak, then run tools or verify. */
export function onModelResponse(d: Draft, config: LoopConfig, response: ModelResponse): void {
  const s = d.state;
  tallyResponse(d, response);
  // An answer under task.samples > 1 starts a round of samples; a round under way takes any reply.
  if (s.sampling || (sampleCount(s) > 1 && proposalOf(response) !== undefined)) {
    if (accountFor(d, config, response)) onSample(d, config, response);
    return;
  }
  s.messages = [
    ...s.messages,
    {
      role: "assistant",
      content: response.text,
      ...(response.toolCalls.length > 0 ? { toolCalls: response.toolCalls } : {}),
    },
  ];
  if (response.text !== "") s.output = response.text;
  if (!accountFor(d, config, response)) return;
  // The policy speaks before any tool of this response runs: a converged run executes nothing more.
  if (convergedNow(d, config)) return;
  const finish = response.toolCalls.find((c) => c.name === FINISH_TOOL);
  if (finish) {
    s.output = finishAnswer(finish) ?? s.output;
    enterVerify(d, config, "the model proposed a final answer (finish)");
    return;
  }
  if (response.toolCalls.length > 0) {
    s.queue = response.toolCalls;
    runNextTool(d, config);
    return;
  }
  if (response.stopReason === "maxTokens") {
    s.messages = [...s.messages, { role: "user", content: "Your reply was cut off; continue." }];
    requestModel(d, config);
    return;
  }
  enterVerify(d, config, "the model ended its turn");
}

/** Usage, cost and truncation; returns false when the guard broke the loop. */
export function accountFor(d: Draft, config: LoopConfig, response: ModelResponse): boolean {
  const s = d.state;
  for (const check of [
    () => recordUsage(s.guard, s.limits, response.usage),
    () => recordCost(s.guard, s.limits, response.costUsd),
    () => recordStopReason(s.guard, response.stopReason),
  ]) {
    const { state, verdict } = check();
    s.guard = state;
    d.guard(verdict);
    if (verdict.kind === "circuitBreak") {
      fail(d, config, verdict.reason, verdict.message);
      return false;
    }
  }
  return true;
}

export function toolError(d: Draft, call: ToolCall, content: string): void {
  const s = d.state;
  s.messages = [
    ...s.messages,
    { role: "tool", toolCallId: call.id, name: call.name, content, isError: true },
  ];
}

/** The next proposed tool call: guard, visibility, capability and privacy, then INTENT before it runs. */
export function runNextTool(d: Draft, config: LoopConfig): void {
  const s = d.state;
  const [turn, ...later] = s.batched ?? [];
  if (turn) {
    // A call of the batch under way: its INTENT is logged already, its outcome is awaited now.
    if (later.length > 0) s.batched = later;
    else delete s.batched;
    d.await(turn.effect, turn.pending);
    return;
  }
  const [call, ...rest] = s.queue;
  if (!call) {
    requestModel(d, config);
    return;
  }
  s.queue = rest;
  const { state, verdict } = checkToolCall(s.guard, s.limits, call.name, call.input);
  s.guard = state;
  d.guard(verdict, { tool: call.name });
  if (verdict.kind === "circuitBreak") {
    fail(d, config, verdict.reason, verdict.message);
    return;
  }
  if (verdict.kind === "block") {
    toolError(d, call, `error [GUARD_BLOCKED]: ${verdict.message}; try something different`);
    runNextTool(d, config);
    return;
  }
  const descriptor = s.spec.agent.tools.includes(call.name) ? descriptorOf(config, call.name) : undefined;
  if (!descriptor) {
    deny(d, config, call, "UNKNOWN_TOOL", `unknown tool '${call.name}'`);
    return;
  }
  try {
    authorizeTool(call.name, descriptor.capability, s.spec.agent.capabilities, s.spec.agent.privacy);
  } catch (err) {
    const error = isAgentError(err) ? err : undefined;
    deny(d, config, call, error?.code ?? "CAPABILITY_DENIED", error?.message ?? String(err));
    return;
  }
  if (batchable(descriptor)) startBatch(d, config, call);
  else startActCall(d, config, call);
}

/** A batchable call and those after it that may join it (see act-batch.ts): logged together. */
function startBatch(d: Draft, config: LoopConfig, call: ToolCall): void {
  const first = logActCall(d, config, call);
  const rest: LoggedAction[] = [];
  for (let next = nextInBatch(d, config); next; next = nextInBatch(d, config))
    rest.push(logActCall(d, config, next));
  if (rest.length === 0) {
    d.await(first.effect, first.pending);
    return;
  }
  d.state.batched = rest;
  d.await({ ...first.effect, concurrent: rest.map((r) => r.effect) }, first.pending);
}

/**
 * An ACT call becomes an action: counted against the budget, listed in the provenance, its INTENT
 * logged. `approval` is a human's go-ahead for a call the tool held (the audit names the approver).
 */
export function startActCall(
  d: Draft,
  config: LoopConfig,
  call: ToolCall,
  approval?: ToolApproval & { heldAction: string },
): void {
  const { effect, pending } = logActCall(d, config, call, approval);
  d.await(effect, pending);
}

function logActCall(
  d: Draft,
  config: LoopConfig,
  call: ToolCall,
  approval?: ToolApproval & { heldAction: string },
): LoggedAction {
  const s = d.state;
  s.actionCount += 1;
  const actionId = `act-${s.actionCount}`;
  s.usage = { ...s.usage, toolCalls: s.usage.toolCalls + 1 };
  s.invocations = [
    ...s.invocations.slice(1 - INVOCATION_LIMIT),
    { actionId, tool: call.name, purpose: "act", inputHash: contentHash(call.input), ok: null },
  ];
  const idempotencyKey = idempotencyKeyFor(s.runId, actionId);
  const { heldAction, ...granted } = approval ?? {};
  const approved = approval ? { approvedBy: approval.by, retries: heldAction } : {};
  return logAction(d, config, {
    actionId,
    tool: call.name,
    input: call.input,
    purpose: "act",
    audit: { kind: "tool.intent", data: { actionId, idempotencyKey, ...approved } },
    link: { callId: call.id },
    ...(approval ? { approval: granted as ToolApproval } : {}),
  });
}

function deny(d: Draft, config: LoopConfig, call: ToolCall, code: string, message: string): void {
  d.audit("tool.denied", "failed", {
    actor: /^[A-Za-z0-9_-]+$/.test(call.name) ? `tool:${call.name}` : "agent",
    reason: message,
    data: { code },
  });
  toolError(d, call, `error [${code}]: ${message}`);
  runNextTool(d, config);
}

function asText(output: unknown): string {
  return typeof output === "string" ? output : canonicalJson(output);
}

/** An ACT tool call finished: its sanitised result joins the conversation; success decides nothing. */
export function recordActResult(
  d: Draft,
  config: LoopConfig,
  ok: boolean,
  output: unknown,
  signals: string[],
  code?: string,
): void {
  const s = d.state;
  const pending = s.pending;
  if (pending?.kind !== "tool") return;
  const descriptor = descriptorOf(config, pending.tool);
  s.invocations = s.invocations.map((inv) =>
    inv.actionId === pending.actionId ? { ...inv, ok, ...(code ? { code } : {}) } : inv,
  );
  // Error text comes from the tool too: it is sanitised like any output before the model sees it.
  const text = sanitizeOutput(asText(output), config.maxOutputBytes).text;
  if (ok) {
    s.evidence = [...s.evidence, text].slice(-50);
    s.signals = [...s.signals, ...signals.map((name) => ({ step: s.step, tool: pending.tool, name }))];
    const completed =
      s.undoChildren && pending.tool === SPAWN_AGENT_TOOL
        ? spawnAction(pending, output)
        : completedAction(descriptor, pending, output);
    if (completed) s.completed = [...s.completed, completed];
  }
  s.messages = [
    ...s.messages,
    {
      role: "tool",
      toolCallId: pending.callId ?? pending.actionId,
      name: pending.tool,
      content: text,
      isError: !ok,
    },
  ];
  d.settle();
  runNextTool(d, config);
}
