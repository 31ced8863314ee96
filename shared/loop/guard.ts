import type { GuardReason, GuardVerdict } from "../contracts/guard.js";
import type { StopReason } from "../contracts/model.js";
import { canonicalJson } from "../runtime/canonical-json.js";
import { xxh64 } from "../runtime/hash.js";
import { type CallCounts, countOf } from "./call-counts.js";

/**
 * The LoopGuard: pure checks over a plain, serialisable state. Each check returns the next state
 * and a verdict; the caller (the FSM) records every verdict that is not `allow`, so warnings are
 * never swallowed. Nothing here reads a clock or the model: the runtime alone decides.
 */
export interface GuardLimits {
  maxIterations: number;
  maxToolCalls: number;
  /** 0 = unlimited. */
  maxCostUsd: number;
  /** Absent = unlimited. */
  maxTokensBudget?: number | undefined;
  maxRepairs: number;
  /** Wall-clock budget from `startedAt`, in ms; absent = none. */
  deadlineMs?: number | undefined;
  /** Identical (tool, input) calls allowed before the next is blocked. Default 3 blocks the 3rd. */
  pingPongThreshold?: number;
  /** Messages the model sees after the task (see windowTranscript); absent = the whole transcript. */
  maxContextMessages?: number | undefined;
}

export const WARN_FRACTION = 0.8;
export const MAX_CONSECUTIVE_TRUNCATION = 5;
export const DEFAULT_PINGPONG_THRESHOLD = 3;
/** A 2-cycle A→B→A→B is blocked on the call that would make it A→B→A→B→A. */
export const CYCLE_CALLS = 5;
/**
 * Repetition is counted over the most recent calls only, so the guard's state (and every
 * checkpoint holding it) stays the same size however long a run goes: a call repeated after 256
 * others is not a ping-pong.
 */
export const CALL_WINDOW = 256;

export interface GuardState {
  iteration: number;
  toolCalls: number;
  consecutiveMaxTokens: number;
  costUsd: number;
  inputTokens: number;
  outputTokens: number;
  repairs: number;
  startedAt: number;
  /**
   * Counts a checkpoint of an older version carried for calls before its window, which never
   * leave (see call-counts.ts): a run this version started has none. The calls in the window are
   * counted from `recentCalls`; a checkpoint stores the two together, as every version has.
   */
  callCounts: CallCounts;
  /**
   * The last CALL_WINDOW call hashes, newest last: the repetition count and the tail that
   * alternation detection read. (Checkpoints of older versions kept five.)
   */
  recentCalls: string[];
}

export interface Checked {
  state: GuardState;
  verdict: GuardVerdict;
}

export const ALLOW: GuardVerdict = { kind: "allow" };

export function initialGuardState(startedAt: number): GuardState {
  return {
    iteration: 0,
    toolCalls: 0,
    consecutiveMaxTokens: 0,
    costUsd: 0,
    inputTokens: 0,
    outputTokens: 0,
    repairs: 0,
    startedAt,
    callCounts: {},
    recentCalls: [],
  };
}

function verdict(
  kind: "warn" | "block" | "circuitBreak",
  reason: GuardReason,
  message: string,
): GuardVerdict {
  return { kind, reason, message };
}

/** Before every model call: the counter moves by exactly one, then the limit is checked. */
export function checkIteration(state: GuardState, limits: GuardLimits): Checked {
  const next = { ...state, iteration: state.iteration + 1 };
  if (next.iteration > limits.maxIterations) {
    return {
      state: next,
      verdict: verdict(
        "circuitBreak",
        "maxIterations",
        `iteration ${next.iteration} exceeds maxIterations ${limits.maxIterations}`,
      ),
    };
  }
  if (next.iteration >= WARN_FRACTION * limits.maxIterations) {
    return {
      state: next,
      verdict: verdict(
        "warn",
        "iterationsNearLimit",
        `iteration ${next.iteration} of ${limits.maxIterations} (>= 80%)`,
      ),
    };
  }
  return { state: next, verdict: ALLOW };
}

/** How many times a call with this hash has been checked. */
export function callCount(state: GuardState, hash: string): number {
  return countOf(state.callCounts, state.recentCalls, hash);
}

/** Hash of a (tool name, input) pair: name and canonical JSON, separated so they cannot run together. */
export function toolCallHash(name: string, input: unknown): string {
  return xxh64(`${name}\u0000${canonicalJson(input)}`);
}

/** Before every tool call: the total limit, then repetition and A→B→A→B alternation. */
export function checkToolCall(state: GuardState, limits: GuardLimits, name: string, input: unknown): Checked {
  const hash = toolCallHash(name, input);
  // Counted before the oldest call leaves the window, as the counts were when a map kept them.
  const count = callCount(state, hash) + 1;
  const recentCalls = [...state.recentCalls, hash];
  if (recentCalls.length > CALL_WINDOW) recentCalls.shift();
  const next: GuardState = { ...state, toolCalls: state.toolCalls + 1, recentCalls };
  if (next.toolCalls > limits.maxToolCalls) {
    return {
      state: next,
      verdict: verdict(
        "circuitBreak",
        "maxToolCalls",
        `tool call ${next.toolCalls} exceeds maxToolCalls ${limits.maxToolCalls}`,
      ),
    };
  }
  if (isTwoCycle(next.recentCalls)) {
    return {
      state: next,
      verdict: verdict(
        "block",
        "pingPongCycle",
        `alternating calls detected ending in '${name}' (A→B→A→B→A)`,
      ),
    };
  }
  const threshold = limits.pingPongThreshold ?? DEFAULT_PINGPONG_THRESHOLD;
  if (count >= threshold) {
    return {
      state: next,
      verdict: verdict("block", "pingPong", `'${name}' called ${count} times with the same input`),
    };
  }
  return { state: next, verdict: ALLOW };
}

function isTwoCycle(calls: readonly string[]): boolean {
  const recent = calls.slice(-CYCLE_CALLS);
  if (recent.length < CYCLE_CALLS) return false;
  const [a, b] = recent;
  if (a === b) return false;
  return recent.every((hash, i) => hash === (i % 2 === 0 ? a : b));
}

/** After every model response: 5 truncated responses in a row break the loop. */
export function recordStopReason(state: GuardState, stopReason: StopReason): Checked {
  if (stopReason !== "maxTokens") {
    return { state: { ...state, consecutiveMaxTokens: 0 }, verdict: ALLOW };
  }
  const next = { ...state, consecutiveMaxTokens: state.consecutiveMaxTokens + 1 };
  if (next.consecutiveMaxTokens >= MAX_CONSECUTIVE_TRUNCATION) {
    return {
      state: next,
      verdict: verdict(
        "circuitBreak",
        "truncation",
        `${next.consecutiveMaxTokens} consecutive responses hit maxTokens`,
      ),
    };
  }
  return { state: next, verdict: ALLOW };
}

/** Accumulates spend; 0 means unlimited. */
export function recordCost(state: GuardState, limits: GuardLimits, costUsd: number): Checked {
  const next = { ...state, costUsd: state.costUsd + costUsd };
  if (limits.maxCostUsd <= 0) return { state: next, verdict: ALLOW };
  if (next.costUsd > limits.maxCostUsd) {
    return {
      state: next,
      verdict: verdict(
        "circuitBreak",
        "costBudget",
        `cost $${next.costUsd.toFixed(6)} exceeds budget $${limits.maxCostUsd}`,
      ),
    };
  }
  if (next.costUsd >= WARN_FRACTION * limits.maxCostUsd) {
    return {
      state: next,
      verdict: verdict(
        "warn",
        "costNearBudget",
        `cost $${next.costUsd.toFixed(6)} is >= 80% of $${limits.maxCostUsd}`,
      ),
    };
  }
  return { state: next, verdict: ALLOW };
}

/** Accumulates tokens and checks the budget (absent = unlimited). */
export function recordUsage(
  state: GuardState,
  limits: GuardLimits,
  usage: { inputTokens: number; outputTokens: number },
): Checked {
  const next = {
    ...state,
    inputTokens: state.inputTokens + usage.inputTokens,
    outputTokens: state.outputTokens + usage.outputTokens,
  };
  return { state: next, verdict: checkTokenBudget(next, limits) };
}

export function checkTokenBudget(state: GuardState, limits: GuardLimits): GuardVerdict {
  const budget = limits.maxTokensBudget;
  if (budget === undefined) return ALLOW;
  const total = state.inputTokens + state.outputTokens;
  if (total > budget) {
    return verdict("circuitBreak", "tokenBudget", `${total} tokens exceed budget ${budget}`);
  }
  if (total >= WARN_FRACTION * budget) {
    return verdict("warn", "tokensNearBudget", `${total} tokens are >= 80% of budget ${budget}`);
  }
  return ALLOW;
}

export function checkDeadline(state: GuardState, limits: GuardLimits, now: number): GuardVerdict {
  if (limits.deadlineMs === undefined) return ALLOW;
  const elapsed = now - state.startedAt;
  if (elapsed > limits.deadlineMs) {
    return verdict(
      "circuitBreak",
      "deadline",
      `wall clock ${elapsed} ms exceeds deadline ${limits.deadlineMs} ms`,
    );
  }
  return ALLOW;
}

/** Before every repair cycle. */
export function checkRepair(state: GuardState, limits: GuardLimits): Checked {
  const next = { ...state, repairs: state.repairs + 1 };
  if (next.repairs > limits.maxRepairs) {
    return {
      state: next,
      verdict: verdict(
        "circuitBreak",
        "maxRepairs",
        `repair ${next.repairs} exceeds maxRepairs ${limits.maxRepairs}`,
      ),
    };
  }
  return { state: next, verdict: ALLOW };
}

/** The most severe of several verdicts; ties keep the first. */
export function worst(...verdicts: GuardVerdict[]): GuardVerdict {
  const rank = { allow: 0, warn: 1, block: 2, circuitBreak: 3 } as const;
  return verdicts.reduce((a, b) => (rank[b.kind] > rank[a.kind] ? b : a), ALLOW);
}
