/**
 * What the runs' audit trails show: whether each is gapless and closed once, how long a run tree
 * went without recording anything, and how long a run taken over after a fault waited for it.
 */
import type { AuditEvent } from "../../dist/shared/contracts/audit.js";
import type { Fault } from "./faults.ts";

const CLOSING = new Set(["run.committed", "run.failed"]);

export function groupBy(
  events: readonly AuditEvent[],
  key: (e: AuditEvent) => string,
): Map<string, AuditEvent[]> {
  const groups = new Map<string, AuditEvent[]>();
  for (const event of events) {
    const list = groups.get(key(event)) ?? [];
    list.push(event);
    groups.set(key(event), list);
  }
  return groups;
}

const at = (e: AuditEvent): number => Date.parse(e.timestamp);

/**
 * Why a finished run's trail is wrong, or undefined: its `seq`s must be exactly 1..n (no gap, no
 * repeat) and it must hold one closing event (committed or failed), its last.
 */
export function trailProblem(events: readonly AuditEvent[]): string | undefined {
  const seqs = events.map((e) => e.seq).sort((a, b) => a - b);
  const broken = seqs.findIndex((seq, i) => seq !== i + 1);
  if (broken >= 0) return `seq ${seqs[broken]} where ${broken + 1} was due (of ${seqs.length} events)`;
  const closing = events.filter((e) => CLOSING.has(e.kind));
  const last = events.reduce<AuditEvent | undefined>((a, e) => (a && a.seq > e.seq ? a : e), undefined);
  if (closing.length !== 1) return `${closing.length} closing events`;
  if (last !== closing[0]) return `closing event seq ${closing[0]?.seq}, last seq ${last?.seq}`;
  return undefined;
}

/**
 * The longest time a run tree (a root and its children, merged on their timestamps) recorded
 * nothing, a human's decision excepted (the wait before `approval.decided` is the human's).
 */
export function longestStall(tree: readonly AuditEvent[]): { ms: number; before?: AuditEvent } {
  const sorted = [...tree].sort((a, b) => at(a) - at(b));
  let longest: { ms: number; before?: AuditEvent } = { ms: 0 };
  for (let i = 1; i < sorted.length; i += 1) {
    const event = sorted[i] as AuditEvent;
    const ms = at(event) - at(sorted[i - 1] as AuditEvent);
    if (event.kind !== "approval.decided" && ms > longest.ms) longest = { ms, before: event };
  }
  return longest;
}

/**
 * A run's take-overs (`run.resumed` written by a worker, not a human's resume), each as the time
 * from the fault that interrupted it (the last one to begin after the run's previous event) to the
 * take-over, counted from when the cluster was whole again (the server back, the new supervisor
 * ready; a kill's moment for a kill); with no fault in between, from the previous event.
 */
export function resumeWaits(run: readonly AuditEvent[], faults: readonly Fault[]): number[] {
  const sorted = [...run].sort((a, b) => a.seq - b.seq);
  const waits: number[] = [];
  for (let i = 1; i < sorted.length; i += 1) {
    const event = sorted[i] as AuditEvent;
    if (event.kind !== "run.resumed" || event.actor === "human") continue;
    const before = at(sorted[i - 1] as AuditEvent);
    const resumed = at(event);
    const fault = faults.filter((f) => f.at >= before && f.at <= resumed).at(-1);
    waits.push(Math.max(0, resumed - Math.min(resumed, fault?.end ?? before)));
  }
  return waits;
}

/** A root run's time from its admission to its closing event (NaN while it has none). */
export function runTime(run: readonly AuditEvent[]): number {
  const admitted = run.find((e) => e.kind === "run.admitted");
  const closing = run.find((e) => CLOSING.has(e.kind));
  return admitted && closing ? at(closing) - at(admitted) : Number.NaN;
}
