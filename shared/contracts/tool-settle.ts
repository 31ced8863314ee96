import { z } from "zod";
import { ErrorPayload, RunId, SchemaVersion } from "./common.js";
import { ToolCallReply } from "./tool.js";

/**
 * Sent by a worker to a tool's service (on `<prefix>.tools.<name>.settle`) about a call a halted run
 * was waiting on, so that its record says what happened:
 * - `abandon`: the run is being cancelled: record that the call never ran, unless it ran or runs;
 * - `ran`: a human checked that the call went through, with `output`: record it as its result;
 * - `notRun`: a human checked that it did not: free its claim, so the call runs when made again.
 * A record a call of the tool finished is never replaced: it is the truth.
 */
export const SettleRequest = z.object({
  schemaVersion: SchemaVersion,
  runId: RunId,
  actionId: z.string().min(1),
  idempotencyKey: z.string().min(1),
  /** Who decided, and why: an abandoned call's record says so. */
  by: z.string().min(1),
  reason: z.string(),
  decision: z.enum(["abandon", "ran", "notRun"]),
  /** The call's result, for `ran`. */
  output: z.unknown().optional(),
});
export type SettleRequest = z.infer<typeof SettleRequest>;

/**
 * What the service did or knows: `abandoned` (the call never ran, and now never will), `recorded`
 * (the output a human gave is the call's result), `freed` (no claim is left), `done` (a call
 * finished: its recorded reply, left as it is), `running` (an abandon found the call running since
 * `since`, epoch ms), or `refused` (a bad request).
 */
export const SettleReply = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("abandoned") }),
  z.object({ outcome: z.literal("recorded") }),
  z.object({ outcome: z.literal("freed") }),
  z.object({ outcome: z.literal("done"), reply: ToolCallReply }),
  z.object({ outcome: z.literal("running"), since: z.number() }),
  z.object({ outcome: z.literal("refused"), error: ErrorPayload }),
]);
export type SettleReply = z.infer<typeof SettleReply>;
