import { z } from "zod";
import { Phase } from "./audit.js";
import { RunId, SchemaVersion } from "./common.js";
import { LoopEvent, ModelRespondedEvent, ToolAbortedEvent, ToolCompletedEvent } from "./loop-event.js";

export const ActionPurpose = z.enum(["act", "verify", "compensate"]);
export type ActionPurpose = z.infer<typeof ActionPurpose>;

const base = {
  schemaVersion: SchemaVersion,
  runId: RunId,
  iteration: z.number().int().nonnegative(),
  at: z.number().int().nonnegative(),
};

/**
 * One record of a run's write-ahead log. Inputs the loop consumed (model responses, tool
 * outcomes, any other event) are recorded so a resumed run replays them instead of redoing them;
 * INTENT is written before a side effect, COMPLETE or ABORT after it.
 */
export const WalRecord = z.discriminatedUnion("type", [
  z.object({
    ...base,
    type: z.literal("INTENT"),
    actionId: z.string(),
    tool: z.string(),
    input: z.unknown(),
    idempotencyKey: z.string(),
    purpose: ActionPurpose,
  }),
  z.object({ ...base, type: z.literal("COMPLETE"), event: ToolCompletedEvent }),
  z.object({ ...base, type: z.literal("ABORT"), event: ToolAbortedEvent }),
  z.object({ ...base, type: z.literal("MODEL"), event: ModelRespondedEvent }),
  z.object({ ...base, type: z.literal("EVENT"), event: LoopEvent }),
  z.object({
    ...base,
    type: z.literal("PHASE"),
    from: Phase.nullable(),
    to: Phase,
    reason: z.string().optional(),
  }),
  z.object({
    ...base,
    type: z.literal("CHECKPOINT"),
    /** sha256 of runId‖iteration: content-addressed, so a re-written checkpoint has the same id. */
    checkpointId: z.string(),
    stateHash: z.string(),
    /** The state's size in canonical JSON, which decides when the next checkpoint is worth writing. */
    bytes: z.number().int().nonnegative().optional(),
    state: z.unknown(),
  }),
  z.object({
    ...base,
    type: z.literal("TERMINAL"),
    /** HALT is resumable: a later record may follow it. COMMIT and FAIL are final. */
    outcome: z.enum(["COMMIT", "FAIL", "HALT"]),
    reason: z.string(),
    artifactHash: z.string(),
    /** The artifact itself (result with provenance, failure report or halt record), so it is durable. */
    artifact: z.unknown(),
  }),
]);
export type WalRecord = z.infer<typeof WalRecord>;
export type WalRecordType = WalRecord["type"];
