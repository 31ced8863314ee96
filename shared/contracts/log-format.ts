import { z } from "zod";
import { canonicallyEqual } from "../runtime/canonical-json.js";
import type { AuditEvent } from "./audit.js";
import type { LogEntry } from "./log.js";
import type { WalRecord } from "./wal.js";

/**
 * The format a run log message's body is written in: 2 states once per message what its records
 * and events share (the run's ids, the time, the first event's `seq`), and each item carries only
 * what differs from that and from the item before it. Format 1, `{ records, events, progress? }`
 * with every item whole, is what earlier builds wrote; its bodies carry no `v`.
 */
export const LOG_FORMAT = 2;
// The defaults below (OPENING, EVENT_TYPE, DATA_SOURCE and dataOf's shape) are part of format 2: a
// reader expands old bodies with them, so changing any of them needs a new LOG_FORMAT.

const Item = z.record(z.string(), z.unknown());
type Item = Record<string, unknown>;

/**
 * A body in format 2. An event's defaults: `schemaVersion` 1, `runId` = `run`, `rootRunId` =
 * `root` (else `run`), `parentRunId` = `parent` (null: none), `seq` = the previous event's plus one
 * (the first's: `seq`), `auditId` = `<runId>:<seq>`, `iteration` and `phase` = the previous
 * event's, `actor` "agent", `status` "started" for the kinds that open something and "passed" for
 * the others, `artifacts` [], `timestamp` = `at` plus `t` ms. A record's: `schemaVersion` 1,
 * `runId` = `run`, `iteration` = the previous record's, `at` = `at`; an INTENT's `idempotencyKey`
 * `<runId>:<actionId>` and `purpose` "act"; the loop event inside a MODEL, COMPLETE or ABORT
 * record has its `type` from the record's, and the one inside any record its `at`. An event's
 * `dataOf` names a record whose content its `data` repeats; a record is named once at most.
 */
export const CompactEntry = z.object({
  v: z.literal(LOG_FORMAT),
  run: z.string(),
  root: z.string().optional(),
  parent: z.string().optional(),
  /** The message's time (epoch ms): its progress's, else its first record's or event's. */
  at: z.number().int().min(0).max(8.64e15),
  /** The `seq` of its first event. */
  seq: z.number().optional(),
  /** The run's progress after the transition, its time being `at`. */
  progress: Item.optional(),
  records: z.array(Item).optional(),
  events: z.array(Item).optional(),
});
export type CompactEntry = z.infer<typeof CompactEntry>;

/** Kinds whose event opens something (a call, a phase, a review): their usual status is "started". */
const OPENING: ReadonlySet<string> = new Set([
  "phase.entered",
  "model.called",
  "tool.intent",
  "critic.requested",
  "repair.started",
  "compensation.started",
  "plan.node.started",
]);
const usualStatus = (kind: unknown): string => (OPENING.has(kind as string) ? "started" : "passed");

/** The loop event type a record of this type holds, where only one is possible. */
const EVENT_TYPE: Readonly<Record<string, string>> = {
  MODEL: "modelResponded",
  COMPLETE: "toolCompleted",
  ABORT: "toolAborted",
};

/** The record type whose content an event of this kind repeats in its `data`. */
const DATA_SOURCE: Readonly<Record<string, string>> = {
  "model.responded": "MODEL",
  "tool.intent": "INTENT",
  "tool.completed": "COMPLETE",
};

/** An event's `data` as the loop core builds it from the record it reports; throws on another shape. */
function dataOf(record: Item): unknown {
  const event = record.event as Item | undefined;
  if (record.type === "INTENT") return { actionId: record.actionId, idempotencyKey: record.idempotencyKey };
  if (record.type === "COMPLETE") return { actionId: event!.actionId };
  const response = event!.response as Item;
  const calls = response.toolCalls as Item[];
  const { stopReason, usage, costUsd } = response;
  return { stopReason, usage, costUsd, toolCalls: calls.map((c) => c.name) };
}

/**
 * The index of the record of this message whose content `e.data` repeats, if one does and no
 * other event names it: a record is named once at most, so what a body expands to is bounded by
 * its own size.
 */
function sourceOf(e: AuditEvent, records: readonly WalRecord[], named: Set<number>): number | undefined {
  const type = DATA_SOURCE[e.kind];
  if (type === undefined || e.data === undefined) return undefined;
  const data = e.data;
  const index = records.findIndex(
    (r, i) =>
      !named.has(i) && r.type === type && r.iteration === e.iteration && canonicallyEqual(dataOf(r), data),
  );
  if (index < 0) return undefined;
  named.add(index);
  return index;
}

/** The time of an ISO timestamp as an offset from `at`, when the offset gives it back exactly. */
function offsetOf(timestamp: string, at: number): number | undefined {
  const ms = Date.parse(timestamp);
  if (!Number.isFinite(ms) || new Date(ms).toISOString() !== timestamp) return undefined;
  return ms - at;
}

/** Where a message's time comes from: its progress, else its first record, else its first event. */
function timeOf(entry: LogEntry): number {
  if (entry.progress) return entry.progress.at;
  if (entry.records[0]) return entry.records[0].at;
  const first = entry.events[0]?.timestamp;
  const ms = first === undefined ? NaN : Date.parse(first);
  return Number.isFinite(ms) ? ms : 0;
}

interface Chain {
  seq: number;
  iteration: unknown;
  phase: unknown;
  /** The body's time as an event's timestamp has it, worked out once per body. */
  isoAt?: string;
}

/** A log entry in format 2 (see CompactEntry), for the run `runId`. Pure; `expandEntry` reverses it. */
export function compactEntry(runId: string, entry: LogEntry): CompactEntry {
  const at = timeOf(entry);
  const first = entry.events[0];
  const out: CompactEntry = { v: LOG_FORMAT, run: runId, at };
  if (first && first.rootRunId !== runId) out.root = first.rootRunId;
  if (first?.parentRunId !== undefined) out.parent = first.parentRunId;
  if (first) out.seq = first.seq;
  if (entry.progress) {
    const { phase, iteration, usage } = entry.progress;
    out.progress = { phase, iteration, usage };
  }
  if (entry.records.length > 0) {
    let iteration: unknown;
    out.records = entry.records.map((r) => {
      const c = compactRecord(r, out, iteration);
      iteration = r.iteration;
      return c;
    });
  }
  if (entry.events.length > 0) {
    const isoAt = new Date(at).toISOString();
    const chain: Chain = { seq: (out.seq ?? 1) - 1, iteration: undefined, phase: undefined, isoAt };
    const named = new Set<number>();
    out.events = entry.events.map((e) => compactEvent(e, out, chain, sourceOf(e, entry.records, named)));
  }
  return out;
}

function compactEvent(e: AuditEvent, env: CompactEntry, chain: Chain, source: number | undefined): Item {
  const c: Item = { kind: e.kind };
  if (e.runId !== env.run) c.runId = e.runId;
  if (e.rootRunId !== (env.root ?? env.run)) c.rootRunId = e.rootRunId;
  if (e.parentRunId !== env.parent) c.parentRunId = e.parentRunId ?? null;
  if (e.seq !== chain.seq + 1) c.seq = e.seq;
  if (e.auditId !== `${e.runId}:${e.seq}`) c.auditId = e.auditId;
  if (e.iteration !== chain.iteration) c.iteration = e.iteration;
  if (e.phase !== chain.phase) c.phase = e.phase;
  if (e.actor !== "agent") c.actor = e.actor;
  if (e.status !== usualStatus(e.kind)) c.status = e.status;
  if (e.reason !== undefined) c.reason = e.reason;
  if (e.artifacts.length > 0) c.artifacts = e.artifacts;
  if (source !== undefined) c.dataOf = source;
  else if (e.data !== undefined) c.data = e.data;
  const t = e.timestamp === chain.isoAt ? 0 : offsetOf(e.timestamp, env.at);
  if (t === undefined) c.timestamp = e.timestamp;
  else if (t !== 0) c.t = t;
  Object.assign(chain, { seq: e.seq, iteration: e.iteration, phase: e.phase });
  return c;
}

function compactRecord(r: WalRecord, env: CompactEntry, iteration: unknown): Item {
  const c: Item = { type: r.type };
  const intent = r.type === "INTENT" ? r : undefined;
  for (const [key, value] of Object.entries(r)) {
    if (key === "type" || value === undefined) continue;
    if (key === "schemaVersion" && value === 1) continue;
    if (key === "runId" && value === env.run) continue;
    if (key === "iteration" && value === iteration) continue;
    if (key === "at" && value === env.at) continue;
    if (key === "idempotencyKey" && intent && value === `${intent.runId}:${intent.actionId}`) continue;
    if (key === "purpose" && value === "act") continue;
    c[key] = key === "event" ? compactLoopEvent(value as Item, r) : value;
  }
  return c;
}

function compactLoopEvent(event: Item, r: WalRecord): Item {
  const { type, at, ...rest } = event;
  return {
    ...(type === EVENT_TYPE[r.type] ? {} : { type }),
    ...(at === r.at ? {} : { at }),
    ...rest,
  };
}

/** A body in format 2 as format 1 has it (unvalidated: the caller validates the result). Pure. */
export function expandEntry(c: CompactEntry): unknown {
  const records = expandRecords(c);
  return {
    records,
    events: expandEvents(c, records),
    ...(c.progress ? { progress: expandProgress(c) } : {}),
  };
}

/** The progress of a body in format 2, whole (unvalidated); undefined when it has none. Pure. */
export function expandProgress(c: CompactEntry): unknown {
  return c.progress && { ...c.progress, at: c.at };
}

/** The events of a body in format 2, whole (unvalidated). Pure. */
export function expandEvents(c: CompactEntry, records = expandRecords(c)): unknown[] {
  const chain: Chain = { seq: (c.seq ?? 1) - 1, iteration: undefined, phase: undefined };
  const named = new Set<number>();
  return (c.events ?? []).map((item) => {
    const { kind, t, ...rest } = item;
    const runId = rest.runId ?? c.run;
    const seq = typeof rest.seq === "number" ? rest.seq : chain.seq + 1;
    const parentRunId = rest.parentRunId === null ? undefined : (rest.parentRunId ?? c.parent);
    const event: Item = {
      schemaVersion: 1,
      auditId: rest.auditId ?? `${typeof runId === "string" ? runId : c.run}:${seq}`,
      runId,
      rootRunId: rest.rootRunId ?? c.root ?? c.run,
      ...(parentRunId === undefined ? {} : { parentRunId }),
      seq,
      iteration: "iteration" in rest ? rest.iteration : chain.iteration,
      phase: "phase" in rest ? rest.phase : chain.phase,
      kind,
      actor: rest.actor ?? "agent",
      status: rest.status ?? usualStatus(kind),
      ...(rest.reason === undefined ? {} : { reason: rest.reason }),
      artifacts: rest.artifacts ?? [],
      ...dataField(item, records, named),
      timestamp: rest.timestamp ?? new Date(c.at + (typeof t === "number" ? t : 0)).toISOString(),
    };
    Object.assign(chain, { seq, iteration: event.iteration, phase: event.phase });
    return event;
  });
}

/**
 * An event's `data`: its own, or what the record it names repeats (null, refused later, when that
 * cannot be read, or when another event of the body named the record already).
 */
function dataField(event: Item, records: readonly Item[], named: Set<number>): Item {
  if (typeof event.dataOf !== "number") return event.data === undefined ? {} : { data: event.data };
  if (named.has(event.dataOf)) return { data: null };
  named.add(event.dataOf);
  const record = records[event.dataOf];
  try {
    return { data: record && record.type === DATA_SOURCE[event.kind as string] ? dataOf(record) : null };
  } catch {
    return { data: null };
  }
}

function expandRecords(c: CompactEntry): Item[] {
  let iteration: unknown;
  return (c.records ?? []).map((item) => {
    const { type, ...rest } = item;
    const record: Item = { schemaVersion: 1, runId: c.run, iteration, at: c.at, type, ...rest };
    iteration = record.iteration;
    if (type === "INTENT") {
      record.idempotencyKey ??= `${String(record.runId)}:${String(record.actionId)}`;
      record.purpose ??= "act";
    }
    const event = record.event;
    if (event && typeof event === "object" && !Array.isArray(event)) {
      const typed = EVENT_TYPE[type as string];
      record.event = { ...(typed ? { type: typed } : {}), at: record.at, ...(event as Item) };
    }
    return record;
  });
}
