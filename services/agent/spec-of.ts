import type { RunSpec } from "../../shared/contracts/run-spec.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { LoopState } from "../../shared/loop/state.js";

/** Whether two specs name the same tools, in the same order (a redelivered first job's, and its WAL's). */
export function sameTools(a: RunSpec, b: RunSpec | undefined): boolean {
  return b !== undefined && a.agent.tools.join("\n") === b.agent.tools.join("\n");
}

/** The run's spec, from the log: its start record, or the state a checkpoint holds. */
export function specOf(records: readonly WalRecord[]): RunSpec | undefined {
  for (const record of records) {
    if (record.type === "EVENT" && record.event.type === "start") return record.event.spec;
    if (record.type === "CHECKPOINT") return (record.state as LoopState).spec;
  }
  return undefined;
}
