import type { AuditEvent } from "../contracts/audit.js";
import type { LoopEvent } from "../contracts/loop-event.js";
import type { WalRecord } from "../contracts/wal.js";
import { canonicallyEqual } from "../runtime/canonical-json.js";
import { AgentError } from "../runtime/errors.js";
import { startRun, transition } from "./fsm.js";
import type { LoopConfig, LoopState, Transition } from "./state.js";
import { restoreCheckpoint } from "./transcript.js";

/** The loop input a WAL record carries, if it carries one (INTENT, PHASE, CHECKPOINT, TERMINAL do not). */
export function eventOf(record: WalRecord): LoopEvent | undefined {
  switch (record.type) {
    case "MODEL":
    case "COMPLETE":
    case "ABORT":
    case "EVENT":
      return record.event;
    default:
      return undefined;
  }
}

export interface Replayed {
  state: LoopState;
  /** The effects of the last transition: what the run was about to do when the log ends. */
  last: Transition;
  transitions: string[];
  /**
   * Records the replay produced past the end of the log: a log written a record per message (by
   * hand, or a test) that ends in the middle of a transition; its successor writes them first. A
   * worker writes a transition in one message, so it leaves none.
   */
  unwritten: WalRecord[];
  /** The audit events of every replayed transition, in order (the log holds them beside the records). */
  audits: AuditEvent[];
  /**
   * Each model request the replayed run made, in order: what `agentctl replay --models` asks again.
   * `escalated`: made after the run switched to its escalation model.
   */
  modelRequests: (Extract<Transition["effects"][number], { type: "callModel" }> & { escalated?: true })[];
  /** With `snapshots: "report"`: the checkpoints compared on their own. */
  checkpoints?: CheckpointReport;
}

export interface ReplayOptions {
  /** Start from the last checkpoint (a worker taking a run over) instead of the run's start. */
  fromCheckpoint?: boolean;
  /**
   * How checkpoints are compared. `strict` (default): like every other record. `skip`: left out of
   * the comparison; a worker taking a run over skips them, because a checkpoint written by an
   * older version holds the state in that version's shape (and its cadence may differ), and a run
   * must survive an upgrade. `report`: left out of the verdict, then compared on their own and
   * summarised in `checkpoints` (what `agentctl replay` shows). Every record that acts or decides
   * (INTENT, MODEL, PHASE, TERMINAL…) is compared in full either way, and a checkpoint is never an
   * input.
   */
  snapshots?: "strict" | "skip" | "report";
}

/** How the log's checkpoints compare with those the replay writes (`snapshots: "report"`). */
export interface CheckpointReport {
  /** Checkpoints in the replayed part of the log, and those the replay wrote over the same part. */
  onRecord: number;
  replayed: number;
  identical: boolean;
  /**
   * The first checkpoint that differs (by position among checkpoints, from 1), and its record
   * number in the log when the log has it (a replay that writes more checkpoints has none).
   */
  firstDifference?: { checkpoint: number; record?: number };
}

/**
 * Rebuilds a run from its WAL by feeding the recorded inputs back through the transition
 * function, starting from the last checkpoint when there is one. Every record the replay emits
 * must equal the one on record (a crash may have cut the log short: the log is then a prefix);
 * any difference is a NONDETERMINISM error naming the first diverging record.
 */
export function replay(
  records: readonly WalRecord[],
  config: LoopConfig,
  options: ReplayOptions = {},
): Replayed {
  const start = options.fromCheckpoint ? lastCheckpointIndex(records) : -1;
  const checkpoint = start >= 0 ? (records[start] as Extract<WalRecord, { type: "CHECKPOINT" }>) : undefined;
  let state: LoopState | undefined = checkpoint
    ? restoreCheckpoint(checkpoint.state as LoopState, checkpoint.bytes)
    : undefined;
  let last: Transition | undefined;
  const produced: WalRecord[] = [];
  const transitions: string[] = [];
  const modelRequests: Replayed["modelRequests"] = [];
  const audits: AuditEvent[] = [];
  const tail = records.slice(start + 1);
  for (const record of tail) {
    const event = eventOf(record);
    if (!event) continue;
    if (event.type === "start") last = startRun(event, config);
    else if (state) last = transition(state, event, config);
    else throw new AgentError("NONDETERMINISM", `the log has '${event.type}' before any start or checkpoint`);
    state = last.state;
    transitions.push(state.transitionHash);
    for (const effect of last.effects) {
      if (effect.type === "wal") produced.push(effect.record);
      else if (effect.type === "callModel")
        modelRequests.push(state.escalatedAtStep === undefined ? effect : { ...effect, escalated: true });
      else if (effect.type === "audit") audits.push(effect.event);
    }
  }
  if (!state || !last) throw new AgentError("NONDETERMINISM", "the log holds no run to replay");
  const snapshots = options.snapshots ?? "strict";
  const written = matchTail(tail, produced, snapshots === "strict");
  return {
    state,
    last,
    transitions,
    unwritten: produced.slice(written),
    audits,
    modelRequests,
    ...(snapshots === "report"
      ? { checkpoints: compareCheckpoints(tail, produced.slice(0, written), start + 1) }
      : {}),
  };
}

/**
 * The last checkpoint with an event after it. A checkpoint is the last record of the transition
 * that wrote it, so a log that ends with one (a crash right after it) is replayed from the
 * checkpoint before: only that replay knows the last transition.
 */
function lastCheckpointIndex(records: readonly WalRecord[]): number {
  let eventAfter = false;
  for (let i = records.length - 1; i >= 0; i--) {
    const record = records[i] as WalRecord;
    if (record.type === "CHECKPOINT" && eventAfter) return i;
    if (eventOf(record)) eventAfter = true;
  }
  return -1;
}

/** Whether a replay `fromCheckpoint` starts at a checkpoint of these records (see lastCheckpointIndex). */
export function resumableFromCheckpoint(records: readonly WalRecord[]): boolean {
  return lastCheckpointIndex(records) >= 0;
}

/**
 * Compares the log's records with the replay's, in order; returns how many of the replay's records
 * the log already holds (those after it are owed). Without `snapshots`, checkpoints are skipped on
 * both sides, and a checkpoint the log ends with counts as on record.
 */
function matchTail(
  recorded: readonly WalRecord[],
  produced: readonly WalRecord[],
  snapshots: boolean,
): number {
  const skipped = (r: WalRecord | undefined): boolean => !snapshots && r?.type === "CHECKPOINT";
  let j = 0;
  recorded.forEach((record, i) => {
    if (skipped(record)) return;
    while (skipped(produced[j])) j += 1;
    const replayed = produced[j];
    if (!replayed) {
      const missing = recorded.slice(i).filter((r) => !skipped(r)).length;
      throw new AgentError("NONDETERMINISM", `the log has ${missing} record(s) the replay does not produce`);
    }
    if (!canonicallyEqual(record, replayed)) {
      throw new AgentError(
        "NONDETERMINISM",
        `replay diverged at record ${i + 1} (${record.type} on record, ${replayed.type} replayed)`,
        { details: { index: i, recorded: record, replayed } },
      );
    }
    j += 1;
  });
  if (skipped(recorded.at(-1))) while (skipped(produced[j])) j += 1;
  return j;
}

/**
 * The log's checkpoints against the replay's, in order (`offset` is the log index of `recorded[0]`):
 * equal when they hold the same and follow the same record. Only the replayed part counts: a
 * checkpoint the replay owes past the end of the log is not a difference.
 */
function compareCheckpoints(
  recorded: readonly WalRecord[],
  produced: readonly WalRecord[],
  offset: number,
): CheckpointReport {
  const logged = checkpointsIn(recorded);
  const rewritten = checkpointsIn(produced);
  const counts = { onRecord: logged.length, replayed: rewritten.length };
  for (let k = 0; k < Math.max(logged.length, rewritten.length); k++) {
    const [a, b] = [logged[k], rewritten[k]];
    if (a && b && a.after === b.after && canonicallyEqual(a.record, b.record)) continue;
    const firstDifference = { checkpoint: k + 1, ...(a ? { record: offset + a.index + 1 } : {}) };
    return { ...counts, identical: false, firstDifference };
  }
  return { ...counts, identical: true };
}

interface PlacedCheckpoint {
  record: WalRecord;
  index: number;
  /** How many other records precede it: its place in the run, whatever checkpoints came before. */
  after: number;
}

function checkpointsIn(records: readonly WalRecord[]): PlacedCheckpoint[] {
  const found: PlacedCheckpoint[] = [];
  records.forEach((record, index) => {
    if (record.type === "CHECKPOINT") found.push({ record, index, after: index - found.length });
  });
  return found;
}
