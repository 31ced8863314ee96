import { z } from "zod";
import { ErrorPayload, RunId, SchemaVersion } from "./common.js";
import { ToolCallReply } from "./tool.js";

/**
 * Sent by a worker cancelling a run that halted waiting on a call (on `<prefix>.tools.<name>.abandon`):
 * the tool service records that the call must never run, unless it already ran or is running.
 */
export const AbandonRequest = z.object({
  schemaVersion: SchemaVersion,
  runId: RunId,
  actionId: z.string().min(1),
  idempotencyKey: z.string().min(1),
  /** Who cancelled the run, and why: the reply a late call with this key gets says so. */
  by: z.string().min(1),
  reason: z.string(),
});
export type AbandonRequest = z.infer<typeof AbandonRequest>;

/**
 * What the service knows of the call: `abandoned` (it never ran, and now never will), `done` (it
 * ran: its recorded reply), `running` (claimed since `since`, epoch ms), or `refused` (a bad request).
 */
export const AbandonReply = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("abandoned") }),
  z.object({ outcome: z.literal("done"), reply: ToolCallReply }),
  z.object({ outcome: z.literal("running"), since: z.number() }),
  z.object({ outcome: z.literal("refused"), error: ErrorPayload }),
]);
export type AbandonReply = z.infer<typeof AbandonReply>;
