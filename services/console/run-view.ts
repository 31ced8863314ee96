/**
 * A run as the console shows it: its timeline, usage against budgets and provenance, built from
 * its log (audit events and WAL records) and its status. Pure: the routes read, this shapes.
 */
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { RunSpec } from "../../shared/contracts/run-spec.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { criticRubric } from "../../shared/loop/policy.js";

/** How much of a tool's input or output, or an event's data, the timeline shows. */
export const SHORTEN_AT = 240;

/** JSON text of a value, cut at `max` characters with an ellipsis. */
export function shorten(value: unknown, max = SHORTEN_AT): string {
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? "undefined");
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** One rubric dimension's score in a verdict, against its minimum. */
export interface ScoreRow {
  name: string;
  score: number | null;
  min: number;
  weight: number;
  passed: boolean;
}

export interface TimelineItem {
  seq: number;
  timestamp: string;
  kind: AuditEvent["kind"];
  phase: string;
  iteration: number;
  actor: string;
  status: AuditEvent["status"];
  reason?: string;
  /** One line on what happened. */
  summary: string;
  /** A tool call's name, input and output (shortened). */
  tool?: { name: string; input?: string; output?: string; error?: string };
  /** A critic verdict's scores against the rubric. */
  scores?: { rows: ScoreRow[]; threshold: number | null; passed: boolean };
}

export interface Budget {
  name: string;
  used: number;
  /** Undefined: unlimited. */
  limit: number | undefined;
}

export interface RunView {
  runId: string;
  agent: string | undefined;
  prompt: string | undefined;
  status: RunStatus | undefined;
  timeline: TimelineItem[];
  budgets: Budget[];
  provenance: unknown;
  output: string | undefined;
}

type Intent = Extract<WalRecord, { type: "INTENT" }>;
type Outcome = { output?: unknown; error?: string };

/** The run's spec, from its first record (the start event). */
export function specOf(records: readonly WalRecord[]): RunSpec | undefined {
  const first = records[0];
  return first?.type === "EVENT" && first.event.type === "start" ? first.event.spec : undefined;
}

const actionIdOf = (event: AuditEvent): string | undefined => {
  const id = event.data?.actionId;
  return typeof id === "string" ? id : undefined;
};

function toolOf(event: AuditEvent, intents: Map<string, Intent>, outcomes: Map<string, Outcome>) {
  const actionId = actionIdOf(event);
  const intent = actionId === undefined ? undefined : intents.get(actionId);
  if (!intent) return undefined;
  const outcome = outcomes.get(intent.actionId);
  return {
    name: intent.tool,
    input: shorten(intent.input),
    ...(outcome?.output !== undefined ? { output: shorten(outcome.output) } : {}),
    ...(outcome?.error !== undefined ? { error: outcome.error } : {}),
  };
}

function scoresOf(event: AuditEvent, spec: RunSpec | undefined): TimelineItem["scores"] {
  const scores = event.data?.scores;
  if (typeof scores !== "object" || scores === null) return undefined;
  const given = scores as Record<string, unknown>;
  const rubric = spec ? criticRubric(spec) : undefined;
  const dims = rubric?.dimensions ?? Object.keys(given).map((name) => ({ name, min: 0, weight: 0 }));
  const rows = dims.map((d) => {
    const value = given[d.name];
    const score = typeof value === "number" ? value : null;
    return { name: d.name, score, min: d.min, weight: d.weight, passed: score !== null && score >= d.min };
  });
  return { rows, threshold: rubric?.threshold ?? null, passed: event.status === "passed" };
}

function summaryOf(event: AuditEvent, tool: TimelineItem["tool"]): string {
  const data = event.data ?? {};
  if (tool) return `${tool.name}(${tool.input ?? ""})${tool.output ? ` → ${tool.output}` : ""}`;
  if (event.kind === "phase.entered") return `→ ${event.phase}`;
  // A review that failed to produce a verdict says why in its reason.
  if (event.kind === "critic.verdict")
    return data.scores ? verdictLine(data) : (event.reason ?? "no verdict");
  if (event.kind === "model.responded" && data.usage)
    return shorten({ stopReason: data.stopReason, usage: data.usage, toolCalls: data.toolCalls });
  if (event.kind.startsWith("guard.")) {
    const why = typeof data.guardReason === "string" ? data.guardReason : "";
    return `${why} ${event.reason ?? ""}`.trim();
  }
  if (event.kind === "approval.decided" && typeof data.decision === "string" && typeof data.by === "string")
    return `${data.decision} by ${data.by}${event.reason ? `: ${event.reason}` : ""}`;
  return event.reason ?? (event.data ? shorten(event.data) : "");
}

/** A verdict's weighted score and defects, in one line. */
function verdictLine(data: Record<string, unknown>): string {
  const gates = data.gates as { weighted?: unknown } | null | undefined;
  const weighted =
    typeof gates?.weighted === "number" ? `weighted ${gates.weighted.toFixed(3)}` : "no rubric";
  return `${weighted}, ${typeof data.defects === "number" ? data.defects : 0} defects`;
}

/** The run's usage against each budget its spec sets (iterations and tool calls always; cost and tokens when capped). */
export function budgetsOf(spec: RunSpec | undefined, status: RunStatus | undefined): Budget[] {
  const usage = status?.usage;
  const resources = spec?.agent.resources;
  if (!usage) return [];
  const cost = resources?.maxCostUsd ?? 0;
  return [
    { name: "iterations", used: status.iteration, limit: resources?.maxIterations },
    { name: "toolCalls", used: usage.toolCalls, limit: resources?.maxToolCalls },
    { name: "tokens", used: usage.inputTokens + usage.outputTokens, limit: resources?.maxTokensBudget },
    { name: "costUsd", used: usage.costUsd, limit: cost > 0 ? cost : undefined },
  ];
}

/** The provenance of the run's result: its status's, else its TERMINAL record's artifact's. */
function provenanceOf(records: readonly WalRecord[], status: RunStatus | undefined): unknown {
  if (status?.terminal?.provenance !== undefined) return status.terminal.provenance;
  const terminal = records.findLast((r) => r.type === "TERMINAL");
  const artifact = terminal?.type === "TERMINAL" ? terminal.artifact : undefined;
  return typeof artifact === "object" && artifact !== null && "provenance" in artifact
    ? artifact.provenance
    : undefined;
}

/** The run's view from what its log and status hold. */
export function runView(
  runId: string,
  read: { events: readonly AuditEvent[]; records: readonly WalRecord[] },
  status: RunStatus | undefined,
): RunView {
  const spec = specOf(read.records);
  const intents = new Map<string, Intent>();
  const outcomes = new Map<string, Outcome>();
  for (const record of read.records) {
    if (record.type === "INTENT") intents.set(record.actionId, record);
    if (record.type === "COMPLETE") outcomes.set(record.event.actionId, { output: record.event.output });
    if (record.type === "ABORT")
      outcomes.set(record.event.actionId, {
        error: `[${record.event.error.code}] ${record.event.error.message}`,
      });
  }
  const timeline = read.events.map((event): TimelineItem => {
    const tool = event.kind.startsWith("tool.") ? toolOf(event, intents, outcomes) : undefined;
    const scores = event.kind === "critic.verdict" ? scoresOf(event, spec) : undefined;
    return {
      seq: event.seq,
      timestamp: event.timestamp,
      kind: event.kind,
      phase: event.phase,
      iteration: event.iteration,
      actor: event.actor,
      status: event.status,
      ...(event.reason !== undefined ? { reason: event.reason } : {}),
      summary: summaryOf(event, tool),
      ...(tool ? { tool } : {}),
      ...(scores ? { scores } : {}),
    };
  });
  const admitted = read.events.find((e) => e.kind === "run.admitted")?.data?.agent;
  return {
    runId,
    agent: spec?.agent.name ?? (typeof admitted === "string" ? admitted : undefined),
    prompt: spec?.task.prompt,
    status,
    timeline,
    budgets: budgetsOf(spec, status),
    provenance: provenanceOf(read.records, status),
    output: status?.terminal?.output,
  };
}
