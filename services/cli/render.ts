import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { UNFINISHED, type BreakerView, type ChildrenGoing } from "./inspect.js";

/** A fixed-width bar: `used` of `limit`, or just the count when there is no limit. */
export function bar(used: number, limit: number | undefined, width = 20): string {
  if (!limit || limit <= 0) return `${used}`;
  const filled = Math.min(width, Math.round((used / limit) * width));
  return `${"█".repeat(filled)}${"░".repeat(width - filled)} ${used}/${limit}`;
}

export interface Limits {
  maxIterations?: number;
  maxToolCalls?: number;
  maxCostUsd?: number;
}

/** One line of `watch`: phase, status and a bar per budget; then what the run waits on, if anything. */
export function statusLine(status: RunStatus, limits: Limits = {}): string {
  const u = status.usage;
  const cost = limits.maxCostUsd ? bar(u.costUsd, limits.maxCostUsd, 10) : `$${u.costUsd.toFixed(4)}`;
  const w = status.waiting;
  return [
    `${status.status.padEnd(17)} ${status.phase.padEnd(9)}`,
    `iter ${bar(status.iteration, limits.maxIterations, 12)}`,
    `tools ${bar(u.toolCalls, limits.maxToolCalls, 12)}`,
    `model calls ${u.modelCalls}`,
    `tokens ${u.inputTokens + u.outputTokens}`,
    `cost ${cost}`,
    ...(w ? [`waiting: ${w.for} for ${w.provider}, next try after ${w.until}, until ${w.giveUpAt}`] : []),
    ...retryingText(status, true),
    ...undone(status),
  ].join("  ");
}

export function auditLine(event: AuditEvent): string {
  const reason = event.reason ? `  ${event.reason}` : "";
  return `${event.timestamp}  ${event.runId}  #${String(event.seq).padStart(3)}  ${event.phase.padEnd(9)} ${event.kind.padEnd(22)} ${event.status.padEnd(8)} ${event.actor}${reason}`;
}

/** One line of `breakers`: the provider, since when, what happens next, the runs it holds up, why. */
export function breakerLine(breaker: BreakerView, now: number): string {
  const open = Math.round((now - breaker.openedAt) / 1000);
  const next =
    breaker.state === "probing"
      ? `being tried by ${breaker.by}`
      : `next try after ${new Date(breaker.until).toISOString()}`;
  const tries = breaker.failedProbes > 0 ? `, ${breaker.failedProbes} failed tries` : "";
  const runs = `${breaker.waitingRuns} ${breaker.waitingRuns === 1 ? "run" : "runs"} waiting`;
  return `${breaker.provider}  open ${open} s${tries}; ${next}; ${runs}  (${breaker.reason})`;
}

/** What an operator can do with a run that waits on one (halted, or awaiting approval); nothing otherwise. */
export function nextSteps(status: Pick<RunStatus, "runId" | "status">): string[] {
  const id = status.runId;
  if (status.status === "awaiting_approval")
    return [
      `waiting for a human: \`agentctl approve ${id}\`, \`agentctl reject ${id}\` or \`agentctl modify ${id} --feedback …\``,
    ];
  if (status.status === "halted")
    return [
      `halted: \`agentctl resume ${id}\` continues it; \`agentctl cancel ${id} --reason …\` ends it, undoing what it can`,
    ];
  return [];
}

/**
 * A reason on one line, at most `max` characters of it (120: a column of a listing). A model
 * error's closing `(POST <url>)` is kept whole, the middle cut instead: the URL tells a wrong
 * `baseUrl` from a provider's outage.
 */
export function oneLine(text: string, max = 120): string {
  const flat = text.replaceAll(/\s+/g, " ").trim();
  if (flat.length <= max) return flat;
  const request = / \((?:GET|POST|PUT|HEAD|DELETE) [^()\s]+\)$/.exec(flat)?.[0] ?? "";
  const kept = request.length < max / 2 ? request : "";
  return `${flat.slice(0, max - kept.length - 1)}…${kept}`;
}

/** A run's children not finished, by status: "children: 2 running, 1 halted". */
function childrenText(children: ChildrenGoing): string {
  const counts = [...UNFINISHED].filter((s) => (children[s] ?? 0) > 0).map((s) => `${children[s]} ${s}`);
  return `children: ${counts.join(", ")}`;
}

/**
 * Of a run retrying a model outage no breaker names: what failed, and (`when`) since when, the
 * next try and when it gives up; nothing otherwise.
 */
function retryingText(status: RunStatus, when: boolean): string[] {
  const r = status.retrying;
  if (!r) return [];
  const times = when ? `, since ${r.since}, next try after ${r.nextTry}, until ${r.giveUpAt}` : "";
  return [`retrying: ${r.for} (${r.code}: ${oneLine(r.reason)})${times}`];
}

/** Of a committed run a failing ancestor undid: by whom, and what is left to a human; else nothing. */
function undone(status: RunStatus): string[] {
  const u = status.undone;
  if (!u) return [];
  const left = u.calls.filter((c) => !c.ok).length + (u.manual?.length ?? 0);
  const calls = `${u.calls.length} ${u.calls.length === 1 ? "call" : "calls"}`;
  return [`undone by ${u.by} (${calls}${left > 0 ? `, ${left} left to a human` : ""})`];
}

/** A generated run id's width: `runs` pads ids to it, or to the longest it lists (a child's is longer). */
export const RUN_ID_WIDTH = 38;

/**
 * One line of `runs`: the run, its status and phase, iteration, tool calls, cost and last change;
 * then its tree's root when it is a child, what it waits on (its children not finished among it),
 * why it halted or failed, for a halted child why its parent can no longer take its result, or,
 * committed, whether a failing ancestor undid it.
 */
export function runLine(
  status: RunStatus,
  about: { children?: ChildrenGoing | undefined; orphaned?: string | undefined; idWidth?: number } = {},
): string {
  const { children, orphaned, idWidth = RUN_ID_WIDTH } = about;
  const root = status.rootRunId && status.rootRunId !== status.runId ? [`root ${status.rootRunId}`] : [];
  const w = status.waiting;
  return [
    status.runId.padEnd(idWidth),
    status.status.padEnd(17),
    status.phase.padEnd(9),
    `iter ${String(status.iteration).padStart(3)}`,
    `tools ${String(status.usage.toolCalls).padStart(3)}`,
    `$${status.usage.costUsd.toFixed(4)}`,
    status.updatedAt,
    ...root,
    ...(w ? [`waiting: ${w.for} for ${w.provider}`] : []),
    ...retryingText(status, false),
    ...(children ? [childrenText(children)] : []),
    // Why a run halted or failed: what an operator reads before a resume or a cancel.
    ...(status.terminal && status.status !== "committed"
      ? [`reason: ${oneLine(status.terminal.reason)}`]
      : []),
    ...(orphaned ? [`orphaned, cancel it: ${oneLine(orphaned)}`] : []),
    ...undone(status),
  ].join("  ");
}
