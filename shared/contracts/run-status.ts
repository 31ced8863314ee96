import { z } from "zod";
import { Phase } from "./audit.js";
import { RunId } from "./common.js";

export const RunStatusValue = z.enum([
  "queued",
  "running",
  "awaiting_approval",
  "committed",
  "failed",
  "halted",
]);
export type RunStatusValue = z.infer<typeof RunStatusValue>;

/** A run that never runs again: committed or failed (a halted run may resume). */
export function isFinished<S extends { status: RunStatusValue }>(
  status: S | undefined,
): status is S & { status: "committed" | "failed" } {
  return status?.status === "committed" || status?.status === "failed";
}

/**
 * Whether a run can no longer take its children's results: it finished, or it is undoing its
 * calls before it fails (FAIL). Its children's fan-in is not sent, and a new child is refused.
 */
export function takesNoChildResults(status: { status: RunStatusValue; phase: string } | undefined): boolean {
  return isFinished(status) || status?.phase === "FAIL";
}

export const RunUsage = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  costUsd: z.number().nonnegative(),
  modelCalls: z.number().int().nonnegative(),
  toolCalls: z.number().int().nonnegative(),
});
export type RunUsage = z.infer<typeof RunUsage>;

/** See RunStatus.waiting. */
export const RunWaiting = z.object({
  /** What the run asked the provider: its model's turn, or its critic's review. */
  for: z.enum(["model turn", "review"]),
  /** The breaker's provider (as `agentctl breakers` lists it). */
  provider: z.string().min(1),
  until: z.iso.datetime({ offset: true }),
  giveUpAt: z.iso.datetime({ offset: true }),
  /** The outage as the breaker tells it. */
  reason: z.string(),
});
export type RunWaiting = z.infer<typeof RunWaiting>;

/** See RunStatus.retrying. */
export const RunRetrying = z.object({
  for: RunWaiting.shape.for,
  /** The failure's stable code (MODEL_UNAVAILABLE, MODEL_RATE_LIMITED, BUS_UNAVAILABLE…). */
  code: z.string().min(1),
  /** The failure as the provider (or the bus) told it. */
  reason: z.string(),
  /** When the run first asked the turn it is retrying. */
  since: z.iso.datetime({ offset: true }),
  /** When the run is next offered to a worker, to ask again (the delay doubles, up to a minute). */
  nextTry: z.iso.datetime({ offset: true }),
  giveUpAt: z.iso.datetime({ offset: true }),
});
export type RunRetrying = z.infer<typeof RunRetrying>;

/** See RunStatus.undone. */
export const RunUndone = z.object({
  /** The failing run (its parent, or an ancestor further up) whose undo ran this run's compensations. */
  by: RunId,
  at: z.iso.datetime({ offset: true }),
  /** Each completed call of the run that had one: its compensating tool, and whether it went through. */
  calls: z.array(z.object({ actionId: z.string(), compensation: z.string(), ok: z.boolean() })),
  /** What could not be undone (an irreversible call, say), as the failing run's report lists it for a human. */
  manual: z.array(z.string()).optional(),
});
export type RunUndone = z.infer<typeof RunUndone>;

export const RunStatus = z.object({
  runId: RunId,
  rootRunId: RunId.optional(),
  parentRunId: RunId.optional(),
  depth: z.number().int().nonnegative().optional(),
  status: RunStatusValue,
  /**
   * Progress as of the status's last write: a worker writes the status when it changes, not every
   * step. `agentctl status` and `watch` show the progress of the run's latest log message (see
   * LogEntry.progress); a finished run's is exact here.
   */
  phase: Phase,
  iteration: z.number().int().nonnegative(),
  usage: RunUsage,
  terminal: z
    .object({
      kind: z.enum(["COMMIT", "FAIL", "HALT"]),
      reason: z.string(),
      output: z.string().optional(),
      provenance: z.unknown().optional(),
    })
    .optional(),
  /**
   * Set while the run waits out its model provider's outage behind the provider's open breaker
   * (AGENT_MODEL_BREAKER_*): whose breaker, when a call may next try the provider, and when the run
   * stops waiting (AGENT_MODEL_OUTAGE_MS after the turn was first asked, or its deadline). Until
   * then a worker handed the run leaves it queued without reading it. Gone with the next write.
   */
  waiting: RunWaiting.optional(),
  /**
   * Set while the run waits out a model outage no open breaker names (before the provider's breaker
   * opens, or with breakers off): what failed, since when the turn is retried, when it is next
   * tried and when the run stops waiting. Only told: the run is taken over at each try. Gone with
   * the next write.
   */
  retrying: RunRetrying.optional(),
  /**
   * Set on a committed child once a failing ancestor has undone what it did (the ancestor's
   * `undo_children`): its status stays committed, as its trail ends, and this says its effects
   * were compensated, by whom, and what is left to a human. Its `updatedAt` is the run's own.
   */
  undone: RunUndone.optional(),
  /**
   * A named root run's spec hash (see `run.admitted`), from its admission until its worker's first
   * write: a copy of its submit with another spec, arriving before the admission's `run.admitted`
   * is written, is refused with it instead of being taken for the same run.
   */
  specHash: z.string().optional(),
  updatedAt: z.iso.datetime({ offset: true }),
});
export type RunStatus = z.infer<typeof RunStatus>;
