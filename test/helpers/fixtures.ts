import type { RunSpecInput } from "../../shared/contracts/run-spec.js";
import type { GuardLimits } from "../../shared/loop/guard.js";
import type { ScriptStep } from "../../shared/contracts/model.js";
import { InMemoryMemory } from "../../shared/memory/in-memory.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { sequentialIds } from "../../shared/runtime/ids.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { LoopRunner, type RunnerDeps } from "../../shared/loop/runner.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import type { AnyTool, ToolContext } from "../../shared/tools/tool.js";
import type { CapabilityObject } from "../../shared/contracts/capability.js";
import type { AuditKind } from "../../shared/contracts/audit.js";
import type { RunResult } from "../../shared/loop/runner.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { LoopState } from "../../shared/loop/state.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";

type SpecOverrides = {
  script?: ScriptStep[];
  loop?: boolean;
  tools?: string[];
  capabilities?: RunSpecInput["agent"]["capabilities"];
  privacy?: "sovereign" | "private" | "standard";
  resources?: NonNullable<RunSpecInput["agent"]["resources"]>;
  verifiers?: NonNullable<RunSpecInput["task"]["verifiers"]>;
  critic?: RunSpecInput["critic"];
  prompt?: string;
  requiresApproval?: boolean;
  name?: string;
};

/** A RunSpec with a scripted model; verifiers default to nonEmpty so the spec is admissible. */
export function spec(o: SpecOverrides = {}): RunSpecInput {
  return {
    schemaVersion: 1,
    task: {
      prompt: o.prompt ?? "Say hello",
      verifiers: o.verifiers ?? (o.critic ? [] : [{ kind: "nonEmpty" }]),
      ...(o.requiresApproval !== undefined ? { requiresApproval: o.requiresApproval } : {}),
    },
    agent: {
      name: o.name ?? "tester",
      model: {
        provider: "scripted",
        script: o.script ?? [{ text: "hello" }],
        ...(o.loop !== undefined ? { loop: o.loop } : {}),
      },
      tools: o.tools ?? ["echo"],
      capabilities: o.capabilities ?? ["compute"],
      ...(o.privacy ? { privacy: o.privacy } : {}),
      ...(o.resources ? { resources: o.resources } : {}),
    },
    ...(o.critic ? { critic: o.critic } : {}),
  };
}

export function registry(...extra: AnyTool[]): ToolRegistry {
  return new ToolRegistry([echoTool, ...extra]);
}

export const START = 1_700_000_000_000;

/**
 * A runner on a manual clock: timestamps are deterministic and timeouts fire only when a test
 * moves time (a tool may call `clock.advance`).
 */
export function runner(overrides: Partial<RunnerDeps> = {}): LoopRunner {
  const clock = new ManualClock(START);
  return new LoopRunner({
    registry: registry(),
    clock,
    random: seededRandom(42),
    ids: sequentialIds(),
    memory: new InMemoryMemory(clock),
    ...overrides,
  });
}

export function kinds(result: RunResult): AuditKind[] {
  return result.audit.map((e) => e.kind);
}

export function modelCalls(result: RunResult): number {
  return result.audit.filter((e) => e.kind === "model.called").length;
}

export function echoCall(text: string): ScriptStep {
  return { toolCalls: [{ name: "echo", input: { text } }] };
}

/** A tool context as the runner would build it, for calling tools directly. */
export const toolCtx = (granted: CapabilityObject, over: Partial<ToolContext> = {}): ToolContext => ({
  runId: "r1",
  actionId: "a1",
  idempotencyKey: "r1:a1",
  granted,
  privacy: "standard",
  depth: 0,
  signal: new AbortController().signal,
  ...over,
});

/**
 * A checkpoint record as an older version wrote it: no transcript digest, the guard keeping its
 * last five calls only. Other records are returned as they are.
 */
export function olderCheckpoint(record: WalRecord): WalRecord {
  if (record.type !== "CHECKPOINT") return record;
  const { transcript: _digest, checkpointBytes: _bytes, ...state } = record.state as LoopState;
  return {
    ...record,
    state: { ...state, guard: { ...state.guard, recentCalls: state.guard.recentCalls.slice(-5) } },
  };
}

/** Guard limits for the guard's tests: 10 iterations, 50 tool calls, no cost budget, 3 repairs. */
export const guardLimits = (over: Partial<GuardLimits> = {}): GuardLimits => ({
  maxIterations: 10,
  maxToolCalls: 50,
  maxCostUsd: 0,
  maxRepairs: 3,
  ...over,
});

/**
 * The status an admission writes for a run it has just queued (no job yet): what a supervisor
 * killed after recording the run leaves. `parentRunId` makes it a child at depth 1.
 */
export function queuedStatus(runId: string, updatedAt = Date.now(), parentRunId?: string): RunStatus {
  return {
    runId,
    rootRunId: parentRunId ?? runId,
    ...(parentRunId ? { parentRunId, depth: 1 } : { depth: 0 }),
    status: "queued",
    phase: "PLAN",
    iteration: 0,
    usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 0, toolCalls: 0 },
    updatedAt: new Date(updatedAt).toISOString(),
  };
}

/**
 * A run's status in a run tree as its worker writes it after a step; "failing": running and
 * undoing its calls before it fails (phase FAIL). `reason` is its terminal's (HALT, COMMIT or FAIL).
 */
export function treeStatus(
  runId: string,
  state: RunStatus["status"] | "failing",
  o: { parentRunId?: string; rootRunId?: string; depth?: number; reason?: string } = {},
): RunStatus {
  const kind = state === "halted" ? "HALT" : state === "committed" ? "COMMIT" : "FAIL";
  return {
    runId,
    rootRunId: o.rootRunId ?? o.parentRunId ?? runId,
    ...(o.parentRunId ? { parentRunId: o.parentRunId } : {}),
    depth: o.depth ?? (o.parentRunId ? 1 : 0),
    status: state === "failing" ? "running" : state,
    phase: state === "failed" || state === "failing" ? "FAIL" : "ACT",
    iteration: 1,
    usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 1 },
    ...(o.reason ? { terminal: { kind, reason: o.reason } } : {}),
    updatedAt: new Date().toISOString(),
  };
}
