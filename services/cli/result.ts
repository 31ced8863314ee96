/**
 * `agentctl result`: what a run ended (or halted) with, as it recorded it. The run's status holds
 * a committed run's output and provenance, but of a failure only its reason: the failure report
 * (diagnosis, compensations, the calls left to a human) is in the WAL's TERMINAL record alone.
 */
import { z } from "zod";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { lastAuditEvent } from "../../shared/bus/audit.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { readLog, scanWal } from "../../shared/bus/run-log.js";
import { toRfc3339 } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";

/** A failure report as this reader needs it (the loop core's FailureReport; fields later builds add are kept in `--json`). */
export const FailureReportView = z.object({
  kind: z.literal("failure"),
  diagnosis: z.string(),
  partialOutput: z.string(),
  lastCheckpoint: z.string().nullable(),
  compensations: z.array(
    z.object({ actionId: z.string(), tool: z.string(), ok: z.boolean(), detail: z.string().optional() }),
  ),
  manualIntervention: z.array(z.object({ actionId: z.string(), tool: z.string(), reason: z.string() })),
});
export type FailureReportView = z.infer<typeof FailureReportView>;

export const CommitArtifactView = z.object({
  kind: z.literal("commit"),
  output: z.string(),
  contentHash: z.string(),
  provenance: z.object({
    toolInvocations: z.array(z.object({ tool: z.string(), ok: z.boolean().nullable() })),
    toolInvocationsOmitted: z.number().optional(),
    repairHistory: z.array(z.object({ strategy: z.string(), diagnosis: z.string() })),
    scores: z.record(z.string(), z.number()).nullable(),
    verification: z.array(z.object({ passed: z.boolean() })),
    modelId: z.string().nullable(),
    startedAt: z.string(),
    committedAt: z.string(),
  }),
});
export type CommitArtifactView = z.infer<typeof CommitArtifactView>;

export const HaltRecordView = z.object({
  kind: z.literal("halt"),
  by: z.string(),
  phase: z.string(),
  lastCheckpoint: z.string().nullable(),
});
export type HaltRecordView = z.infer<typeof HaltRecordView>;

export const ArtifactView = z.discriminatedUnion("kind", [
  FailureReportView,
  CommitArtifactView,
  HaltRecordView,
]);
export type ArtifactView = z.infer<typeof ArtifactView>;

export type Outcome = "COMMIT" | "FAIL" | "HALT";

/**
 * A run's outcome: from its TERMINAL record (`wal`); when its log holds none (a run failed before a worker started it), from its
 * closing audit event (`audit`); with neither, from its status (`status`).
 */
export type RunResult = {
  runId: string;
  outcome: Outcome;
  reason: string;
  /** When it was recorded (RFC 3339). */
  at: string;
  artifactHash: string | undefined;
} & (
  | {
      source: "wal";
      /** The artifact as recorded (`--json` prints it whole). */
      artifact: unknown;
      /** The same, read for display; undefined when a build this one does not know wrote another shape. */
      view: ArtifactView | undefined;
    }
  | {
      /** Neither a TERMINAL record nor a closing audit event: what the status says (a child refused at its submit never ran). */
      source: "status";
    }
  | {
      source: "audit";
      /** run.failed's diagnosis. */
      diagnosis?: string;
      /** run.failed's count of the calls left to a human (the report that names them is the TERMINAL record's). */
      needsHuman?: number;
      /** run.committed's output. */
      output?: string;
    }
);

/** A result as `--json` prints it: the artifact as recorded, not the view read for display. */
export function resultJson(result: RunResult): Record<string, unknown> {
  if (result.source !== "wal") return result;
  const { view: _view, ...recorded } = result;
  return recorded;
}

/** Statuses whose run has a result to show; a run that later resumes from a halt shows its new one. */
const ENDED: Partial<Record<RunStatus["status"], Outcome>> = {
  committed: "COMMIT",
  failed: "FAIL",
  halted: "HALT",
};

const CLOSING: Record<Outcome, AuditEvent["kind"]> = {
  COMMIT: "run.committed",
  FAIL: "run.failed",
  HALT: "run.halted",
};

/**
 * The run's result. The WAL is read from the run's last checkpoint (a finished run's tail is
 * short); its whole log only when the tail holds no TERMINAL record (a checkpoint written after a
 * halt it resumed from, then a commit without one).
 */
export async function runResult(bus: ActorBus, runId: string): Promise<RunResult> {
  const status = await new RunStatusStore(bus.buckets.runs).get(runId);
  const expected = status ? ENDED[status.status] : undefined;
  if (status && !expected) {
    const next =
      status.status === "awaiting_approval"
        ? `a human decides it: \`agentctl approve ${runId}\`, \`reject\` or \`modify\``
        : `\`agentctl watch ${runId}\` follows it`;
    throw new AgentError(
      "RUN_NOT_FINISHED",
      `run '${runId}' is ${status.status.replaceAll("_", " ")} (${status.phase}): it has no result yet; ${next}`,
    );
  }
  const terminal = await lastTerminal(bus, runId);
  if (terminal) return fromWal(runId, terminal);
  const closing = await closingEvent(bus, runId, expected);
  if (closing) return fromAudit(closing);
  if (status?.terminal) {
    const { kind, reason } = status.terminal;
    return { runId, outcome: kind, reason, at: status.updatedAt, artifactHash: undefined, source: "status" };
  }
  throw new AgentError(
    "NOT_FOUND",
    status ? `run '${runId}' ${status.status}, but its log does not hold its outcome` : `no run '${runId}'`,
  );
}

type TerminalRecord = Extract<WalRecord, { type: "TERMINAL" }>;

/** The run's last TERMINAL record: looked for after its latest checkpoint, then in its whole log. */
async function lastTerminal(bus: ActorBus, runId: string): Promise<TerminalRecord | undefined> {
  const tail = await readLog(bus, runId, "checkpoint");
  let found = findLast(tail.records.map((r) => r.record));
  if (found || tail.fromSeq === 1 || tail.records.length === 0) return found;
  for await (const record of scanWal(bus, runId)) if (record.type === "TERMINAL") found = record;
  return found;
}

function findLast(records: readonly WalRecord[]): TerminalRecord | undefined {
  return records.findLast((r): r is TerminalRecord => r.type === "TERMINAL");
}

function fromWal(runId: string, record: TerminalRecord): RunResult {
  const view = ArtifactView.safeParse(record.artifact);
  return {
    runId,
    outcome: record.outcome,
    reason: record.reason,
    at: toRfc3339(record.at),
    artifactHash: record.artifactHash,
    source: "wal",
    artifact: record.artifact,
    view: view.success ? view.data : undefined,
  };
}

/** The run's closing audit event: the one its status names, or, with no status, whichever final one it has. */
async function closingEvent(
  bus: ActorBus,
  runId: string,
  expected: Outcome | undefined,
): Promise<{ outcome: Outcome; event: AuditEvent } | undefined> {
  const outcomes: Outcome[] = expected ? [expected] : ["FAIL", "COMMIT", "HALT"];
  for (const outcome of outcomes) {
    const last = await lastAuditEvent(bus, runId, CLOSING[outcome]);
    if (last) return { outcome, event: last.event };
  }
  return undefined;
}

const FailedData = z.object({ diagnosis: z.string().optional(), manualIntervention: z.number().optional() });
const CommittedData = z.object({ output: z.string().optional() });

function fromAudit({ outcome, event }: { outcome: Outcome; event: AuditEvent }): RunResult {
  const failed = FailedData.safeParse(event.data ?? {});
  const committed = CommittedData.safeParse(event.data ?? {});
  return {
    runId: event.runId,
    outcome,
    reason: event.reason ?? "",
    at: event.timestamp,
    artifactHash: event.artifacts[0],
    source: "audit",
    ...(outcome === "FAIL" && failed.success && failed.data.diagnosis !== undefined
      ? { diagnosis: failed.data.diagnosis }
      : {}),
    ...(outcome === "FAIL" && failed.success && failed.data.manualIntervention !== undefined
      ? { needsHuman: failed.data.manualIntervention }
      : {}),
    ...(outcome === "COMMIT" && committed.success && committed.data.output !== undefined
      ? { output: committed.data.output }
      : {}),
  };
}
