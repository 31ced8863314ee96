import { z } from "zod";
import { RUN_ID_PATTERN } from "../runtime/ids.js";

/** Every envelope carries its schema version; fields evolve additively within a version. */
export const SchemaVersion = z.literal(1);
export type SchemaVersion = z.infer<typeof SchemaVersion>;
export const SCHEMA_VERSION = 1 as const;

export const RunId = z.string().regex(RUN_ID_PATTERN, "runId must match [A-Za-z0-9_-]{1,64}");
export type RunId = z.infer<typeof RunId>;

export const JsonObject = z.record(z.string(), z.unknown());
export type JsonObject = z.infer<typeof JsonObject>;

export const Usage = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  /** Of `inputTokens`, those read from the provider's prompt cache (priced at the cached rate). */
  cachedInputTokens: z.number().int().nonnegative().optional(),
});
export type Usage = z.infer<typeof Usage>;

export const ErrorPayload = z.object({
  code: z.string(),
  message: z.string(),
  retryable: z.boolean().optional(),
  details: z.unknown().optional(),
});
export type ErrorPayload = z.infer<typeof ErrorPayload>;
