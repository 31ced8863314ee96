import { z } from "zod";
import { RunId, SchemaVersion } from "./common.js";
import { RunSpec } from "./run-spec.js";

export const SubmitReply = z.discriminatedUnion("ok", [
  z.object({
    schemaVersion: SchemaVersion,
    ok: z.literal(true),
    runId: RunId,
    status: z.enum(["admitted", "existing"]),
  }),
  z.object({
    schemaVersion: SchemaVersion,
    ok: z.literal(false),
    error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }),
  }),
]);
export type SubmitReply = z.infer<typeof SubmitReply>;

export const Approval = z.object({
  decision: z.enum(["approve", "reject", "modify"]),
  by: z.string().min(1),
  reason: z.string().optional(),
  feedback: z.string().optional(),
  /**
   * The revision of the run's status its decider read (agentctl sends it): a run changed since is
   * refused with RUN_CHANGED, so that a decision, or a copy of it asked again, never lands on a later
   * request than the one its decider saw.
   */
  revision: z.number().int().positive().optional(),
});
export type Approval = z.infer<typeof Approval>;

/** Who decided what, as a decision's job carries it and its `approval.decided` event records it. */
export const DecidedBy = Approval.pick({ decision: true, by: true });
export type DecidedBy = z.infer<typeof DecidedBy>;

export const KillSwitch = z.object({ active: z.boolean(), reason: z.string(), by: z.string().min(1) });
export type KillSwitch = z.infer<typeof KillSwitch>;

export const SpawnAgentInput = z.object({ runs: z.array(RunSpec).min(1) });
export type SpawnAgentInput = z.infer<typeof SpawnAgentInput>;

export const SpawnAgentResult = z.object({
  runId: z.string(),
  status: z.string(),
  output: z.string().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});
export const SpawnAgentOutput = z.object({ results: z.array(SpawnAgentResult) });
export type SpawnAgentOutput = z.infer<typeof SpawnAgentOutput>;
