import { z } from "zod";
import { AuditStatus } from "./audit.js";
import { CapabilityObject, PrivacyTier, RequiredCapability } from "./capability.js";
import { RunId, SchemaVersion } from "./common.js";
import { RedactionRules } from "./redaction.js";

export const Reversibility = z.enum(["pure", "reversible", "compensable", "irreversible"]);
export type Reversibility = z.infer<typeof Reversibility>;

export const DEFAULT_TOOL_TIMEOUT_MS = 120_000;
export const INFERENCE_TOOL_TIMEOUT_MS = 300_000;

/** The serialisable face of a tool: what the registry, the FSM and remote callers see. */
export const ToolDescriptor = z.object({
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  description: z.string(),
  inputSchema: z.record(z.string(), z.unknown()),
  capability: RequiredCapability,
  timeoutMs: z.number().int().positive(),
  reversibility: Reversibility,
  idempotent: z.boolean(),
  /** The tool that undoes this one; it receives `{ original, output }`. */
  compensation: z.object({ tool: z.string() }).optional(),
  /** Fields and values of its calls kept out of the run's log (and out of the model's view). */
  redact: RedactionRules.optional(),
});
export type ToolDescriptor = z.infer<typeof ToolDescriptor>;

/**
 * What a tool answers (as the `details` of an APPROVAL_REQUIRED error) when a call needs a human's
 * approval: a token naming exactly what would be approved (the tool checks it when the approved
 * call comes back) and the reason shown to the approver.
 */
export const ToolApprovalRequest = z.object({
  token: z.string().min(1).max(200),
  reason: z.string().min(1).max(2000),
});
export type ToolApprovalRequest = z.infer<typeof ToolApprovalRequest>;

/** A human's approval of one tool call, attached by the runtime when it makes the call again. */
export const ToolApproval = z.object({
  token: z.string().min(1).max(200),
  by: z.string().min(1),
  /** Epoch milliseconds of the decision. */
  decidedAt: z.number().int().nonnegative(),
  reason: z.string().optional(),
});
export type ToolApproval = z.infer<typeof ToolApproval>;

export const ToolCallRequest = z.object({
  schemaVersion: SchemaVersion,
  runId: RunId,
  actionId: z.string().min(1),
  idempotencyKey: z.string().min(1),
  input: z.unknown(),
  /** Epoch milliseconds after which the caller no longer waits. */
  deadline: z.number().int(),
  /** The manifest capability that granted the call: its allowlists bound what the tool may touch. */
  grant: CapabilityObject.optional(),
  privacy: PrivacyTier.optional(),
  /** Spawn depth of the calling run. */
  depth: z.number().int().nonnegative().optional(),
  /** Present when a human approved this call after the tool asked (APPROVAL_REQUIRED). */
  approval: ToolApproval.optional(),
});
export type ToolCallRequest = z.infer<typeof ToolCallRequest>;

export const ToolError = z.object({
  code: z.string(),
  message: z.string(),
  retryable: z.boolean(),
  /** Structured detail for the caller (APPROVAL_REQUIRED: a ToolApprovalRequest). */
  details: z.unknown().optional(),
});
export type ToolError = z.infer<typeof ToolError>;

/**
 * An audit note a tool returns with its result: the runtime records each as a `tool.reported`
 * audit event of the calling run (actor `tool:<name>`), so a tool's own decisions land in the
 * run's gapless audit trail without the tool writing to the audit stream.
 */
export const ToolAuditNote = z.object({
  status: AuditStatus,
  reason: z.string().optional(),
  artifacts: z.array(z.string()).optional(),
  data: z.record(z.string(), z.unknown()).optional(),
});
export type ToolAuditNote = z.infer<typeof ToolAuditNote>;

export const ToolCallReply = z.discriminatedUnion("ok", [
  z.object({
    ok: z.literal(true),
    output: z.unknown(),
    signals: z.array(z.string()).optional(),
    audit: z.array(ToolAuditNote).optional(),
  }),
  z.object({ ok: z.literal(false), error: ToolError }),
]);
export type ToolCallReply = z.infer<typeof ToolCallReply>;
