import { z } from "zod";

/** What a tick run's prompt carries (as JSON): the correlation ids and the universe to consider. */
export const TickTask = z.object({
  decision_id: z.string().min(1),
  tick_id: z.string().min(1),
  as_of: z.iso.datetime({ offset: true }),
  symbols: z.array(z.string().min(1)).min(1),
  execution_mode: z.enum(["paper", "shadow", "live"]).default("paper"),
});
export type TickTask = z.infer<typeof TickTask>;

/** The tick's final answer, checked by the run's verifier: a tick commits once its decision is recorded. */
export const TickOutcome = z.object({
  decision_id: z.string(),
  tick_id: z.string(),
  outcome: z.enum(["executed", "no_op", "rejected", "aborted", "safe_recovery", "error"]),
  ledger_ref: z.string().min(1),
  reason: z.string(),
});
export type TickOutcome = z.infer<typeof TickOutcome>;
