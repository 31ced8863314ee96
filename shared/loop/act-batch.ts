import type { ToolCall } from "../contracts/model.js";
import type { ToolDescriptor } from "../contracts/tool.js";
import { authorizeTool } from "../tools/capabilities.js";
import { descriptorOf } from "./action.js";
import type { Draft } from "./draft.js";
import { checkToolCall } from "./guard.js";
import type { LoopConfig } from "./state.js";

/**
 * Independent calls of one model response run at the same time when their tools are idempotent
 * and have nothing to undo (reversibility `pure`): a batch. Its calls' INTENTs are logged in one
 * transition, so they are durable together before any runs; the shell may run them at once, and
 * the loop still takes their outcomes one at a time, in the order the model made the calls, so a
 * replay of the log gives the same states. A batch is the run of such calls at the head of the
 * queue: a call of another tool ends it and runs alone, in its place.
 */
export function batchable(descriptor: ToolDescriptor | undefined): boolean {
  return descriptor !== undefined && descriptor.idempotent && descriptor.reversibility === "pure";
}

/**
 * The next call of the queue, taken into the current batch when it may join it: seen by the
 * agent, batchable, authorised, and allowed by the guard (a warning is audited as it would be
 * alone). Undefined, and the queue as it was, when it may not: it is then decided on its own turn.
 */
export function nextInBatch(d: Draft, config: LoopConfig): ToolCall | undefined {
  const s = d.state;
  const [call, ...rest] = s.queue;
  if (!call || !s.spec.agent.tools.includes(call.name)) return undefined;
  const descriptor = descriptorOf(config, call.name);
  if (!descriptor || !batchable(descriptor)) return undefined;
  try {
    authorizeTool(call.name, descriptor.capability, s.spec.agent.capabilities, s.spec.agent.privacy);
  } catch {
    return undefined;
  }
  const { state, verdict } = checkToolCall(s.guard, s.limits, call.name, call.input);
  if (verdict.kind !== "allow" && verdict.kind !== "warn") return undefined;
  s.guard = state;
  d.guard(verdict, { tool: call.name });
  s.queue = rest;
  return call;
}
