/**
 * What the booking service's ledger shows against the runs: no booking executed twice under one
 * idempotency key, every booking in its run's trail as completed, and each run's bookings as its
 * script made them (a committed run's all made once, a failed run's all undone).
 */
import type { AuditEvent } from "../../dist/shared/contracts/audit.js";
import { countByKey, type Execution } from "./ledger.ts";
import type { Outcome } from "./driver.ts";

export interface EffectFindings {
  /** Keys executed more than once. */
  duplicates: string[];
  /** Bookings made that their run's trail does not show completed. */
  untraced: string[];
  /** Roots whose bookings are not what their script and outcome call for. */
  mismatched: string[];
}

export function checkEffects(
  ledger: readonly Execution[],
  byRun: ReadonlyMap<string, AuditEvent[]>,
  outcomes: readonly Outcome[],
): EffectFindings {
  const duplicates = [...countByKey(ledger)].filter(([, n]) => n > 1).map(([key, n]) => `${key} ×${n}`);
  const untraced = ledger
    .filter((e) => e.tool === "book")
    .filter(
      (e) =>
        !(byRun.get(e.runId) ?? []).some(
          (a) =>
            a.kind === "tool.completed" &&
            (a.data as { actionId?: string } | undefined)?.actionId === e.actionId,
        ),
    )
    .map((e) => e.key);
  const rootOf = (runId: string): string | undefined => byRun.get(runId)?.[0]?.rootRunId;
  const perRoot = new Map<string, { book: Set<string>; unbook: Set<string> }>();
  for (const e of ledger) {
    const root = rootOf(e.runId) ?? e.runId;
    const tally = perRoot.get(root) ?? { book: new Set(), unbook: new Set() };
    (e.tool === "book" ? tally.book : tally.unbook).add(e.key);
    perRoot.set(root, tally);
  }
  const mismatched: string[] = [];
  for (const { run, status } of outcomes) {
    const tally = perRoot.get(run.runId);
    const booked = tally?.book.size ?? 0;
    const unbooked = tally?.unbook.size ?? 0;
    if (status === "committed" && (booked !== run.bookings || unbooked > 0)) {
      mismatched.push(
        `${run.runId}: committed with ${booked} of ${run.bookings} bookings, ${unbooked} undone`,
      );
    } else if (status === "failed" && unbooked !== booked) {
      mismatched.push(`${run.runId}: failed with ${booked} bookings, ${unbooked} undone`);
    }
  }
  return { duplicates, untraced, mismatched };
}
