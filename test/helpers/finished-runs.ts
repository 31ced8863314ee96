import type { ActorBus } from "../../shared/bus/actor.js";
import { appendEvent, logHead, readAudit } from "../../shared/bus/audit.js";
import { LogWriter } from "../../shared/bus/run-log.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import type { AuditEvent, AuditKind } from "../../shared/contracts/audit.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { WalRecord } from "../../shared/contracts/wal.js";

/** How many messages the run log holds for one run. */
export async function logMessages(bus: ActorBus, runId: string): Promise<number> {
  const info = await bus.jsm.streams.info(bus.subjects.streams().log, {
    subjects_filter: bus.subjects.logAll(runId),
  });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}

/** The kinds of a run's audit events, in order. */
export async function auditKinds(bus: ActorBus, runId: string): Promise<string[]> {
  const kinds: string[] = [];
  for await (const event of readAudit(bus, { runId })) kinds.push(event.kind);
  return kinds;
}

/** A run's lifecycle event as its writer makes one (seq 1, or `seq`; `data` when given). */
export function lifecycleEvent(
  runId: string,
  kind: AuditKind,
  seq = 1,
  data: Record<string, unknown> = {},
): AuditEvent {
  return {
    schemaVersion: 1,
    auditId: `${runId}:${seq}`,
    runId,
    rootRunId: runId,
    seq,
    iteration: 1,
    phase: kind === "run.admitted" ? "PLAN" : "COMMIT",
    kind,
    actor: kind === "run.admitted" ? "supervisor" : "agent",
    status: kind === "run.failed" ? "failed" : "passed",
    artifacts: [],
    data,
    timestamp: new Date().toISOString(),
  };
}

/** A run's lifecycle event appended to its log after what it holds (`after`: that message's sequence). */
export async function lifecycle(
  bus: Parameters<typeof appendEvent>[0],
  runId: string,
  kind: AuditKind,
  seq = 1,
  data: Record<string, unknown> = {},
  after?: number,
): Promise<void> {
  const head = after ?? (await logHead(bus, runId)).seq;
  const appended = await appendEvent(bus, lifecycleEvent(runId, kind, seq, data), head, `${runId}:${seq}`);
  if (appended === "refused") throw new Error(`${runId}'s log moved on while ${kind} was appended`);
}

/** The bucket keys of a run's two tool calls (see `finishedRun`). */
export const toolKeys = (runId: string): string[] => [
  idempotencyBucketKey("pay", `${runId}:act-1`),
  idempotencyBucketKey("ship", `${runId}:act-2`),
];

/** How many of a run's two tool calls still have an idempotency record (a delete marker counts). */
export async function toolRecords(bus: ActorBus, runId: string): Promise<number> {
  const entries = await Promise.all(toolKeys(runId).map((key) => bus.buckets.idempotency.get(key)));
  return entries.filter((entry) => entry !== null).length;
}

/**
 * A run with a log message of 3 records (two tool calls' INTENTs and a PHASE; `garbled`: 3 bytes no
 * record reads as), the calls' idempotency records (the second one's a delete marker, as a freed claim
 * leaves), a status, and its lifecycle event (the retention sweeps read only these), written after
 * whatever the run's log holds.
 */
export async function finishedRun(
  bus: ActorBus,
  runId: string,
  status: RunStatus["status"],
  kind: AuditKind,
  options: { seq?: number; garbled?: boolean } = {},
): Promise<void> {
  const base = { schemaVersion: 1 as const, runId, iteration: 1, at: Date.now() };
  const intent = (actionId: string, tool: string): WalRecord => ({
    ...base,
    type: "INTENT",
    actionId,
    tool,
    input: { amount: 1 },
    idempotencyKey: `${runId}:${actionId}`,
    purpose: "act",
  });
  const records: WalRecord[] = [
    intent("act-1", "pay"),
    intent("act-2", "ship"),
    { ...base, type: "PHASE", from: "ACT", to: "COMMIT" },
  ];
  const head = (await logHead(bus, runId)).seq;
  const fence = { lastSubjectSequence: head, lastSubjectSequenceSubject: bus.subjects.logAll(runId) };
  const written = options.garbled
    ? (await bus.js.publish(bus.subjects.log(runId, "step"), new Uint8Array([1, 2, 3]), { expect: fence }))
        .seq
    : await new LogWriter(bus, runId, "w1", head, 0).append(records);
  const [paid, shipped] = toolKeys(runId) as [string, string];
  await bus.buckets.idempotency.put(paid, new TextEncoder().encode("done"));
  await bus.buckets.idempotency.put(shipped, new TextEncoder().encode("claimed"));
  await bus.buckets.idempotency.delete(shipped);
  await new RunStatusStore(bus.buckets.runs).put({
    runId,
    status,
    phase: "COMMIT",
    iteration: 1,
    usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 0 },
    updatedAt: new Date().toISOString(),
  });
  await lifecycle(bus, runId, kind, options.seq ?? 1, {}, written);
}
