import type { LoopEvent } from "../../dist/shared/contracts/loop-event.js";
import type { Transition } from "../../dist/shared/loop/state.js";
import { echoText } from "./workload.ts";

/**
 * The RunSpec (before parsing) of a long run of echo calls: a scripted model the bench answers by
 * hand, `limit` iterations and tool calls, and a context window of `window` messages if given.
 */
export function echoRunSpec(name: string, limit: number, window?: number): unknown {
  return {
    schemaVersion: 1,
    task: { prompt: "A long run.", verifiers: [{ kind: "nonEmpty" }] },
    agent: {
      name,
      model: { provider: "scripted", script: [{ text: "done" }], loop: true },
      tools: ["echo"],
      capabilities: ["compute"],
      resources: {
        maxIterations: limit,
        maxToolCalls: limit,
        ...(window ? { maxContextMessages: window } : {}),
      },
    },
  };
}

/**
 * The next input of a run of echo calls fed to the loop core by hand (W3's histories, the step
 * cost micro-benchmark): no memories, every tool call's input echoed back as its output, and
 * model turns that each call `echo` with a fresh input until `turns` of them were given (`turn`
 * counts those so far). Undefined once the run waits on a model turn past that, or on nothing.
 */
export function nextEchoEvent(t: Transition, turn: number, turns: number, at: number): LoopEvent | undefined {
  const awaiting = t.effects.find((e) => e.type !== "wal" && e.type !== "audit" && e.type !== "storeMemory");
  if (awaiting?.type === "recallMemory") return { type: "memoryRecalled", at, memories: [] };
  if (awaiting?.type === "callTool") {
    return { type: "toolCompleted", at, actionId: awaiting.actionId, output: awaiting.input };
  }
  if (awaiting?.type !== "callModel" || turn >= turns) return undefined;
  const call = { id: `call_${turn + 1}`, name: "echo", input: { text: echoText(turn + 1) } };
  const response = {
    text: "",
    toolCalls: [call],
    stopReason: "toolUse" as const,
    usage: { inputTokens: 0, outputTokens: 0 },
    costUsd: 0,
    model: "scripted",
  };
  return { type: "modelResponded", at, requestId: awaiting.requestId, response };
}
