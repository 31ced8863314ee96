import { z } from "zod";

/**
 * A field of a tool call to redact: `input` or `output`, then object keys (`.key`), array indexes
 * (`[0]`) or wildcards (`.*`, `[*]`, any key or element). `input` alone is the whole input.
 */
export const RedactionPath = z
  .string()
  .regex(
    /^(input|output)(\.[^.[\]]+|\[(\d+|\*)\])*$/,
    "a redaction path starts with `input` or `output`, then `.key`, `[0]`, `.*` or `[*]` segments",
  );
export type RedactionPath = z.infer<typeof RedactionPath>;

function compiles(source: string): boolean {
  try {
    new RegExp(source, "g");
    return true;
  } catch {
    return false;
  }
}

const Regex = z.string().min(1).refine(compiles, "not a valid regular expression");

/**
 * A regular expression (JavaScript syntax); every match inside a string of the call is redacted.
 * The audit names a pattern that fired by its `name`, else by the expression itself: name one that
 * quotes a literal secret.
 */
export const RedactionPattern = z.union([
  Regex,
  z.strictObject({ name: z.string().min(1).max(64), regex: Regex }),
]);
export type RedactionPattern = z.infer<typeof RedactionPattern>;

/** What to keep out of the run's log for one tool: fields by path, and values by pattern. */
export const RedactionRules = z.strictObject({
  paths: z.array(RedactionPath).optional(),
  patterns: z.array(RedactionPattern).optional(),
});
export type RedactionRules = z.infer<typeof RedactionRules>;

/** The operators' redaction file (AGENT_REDACT_FILE, TOOLS_REDACT_FILE): rules per tool name, `*` for every tool. */
export const RedactionConfig = z.strictObject({
  tools: z.record(z.string().regex(/^(\*|[A-Za-z0-9_-]{1,64})$/, "a tool name or `*`"), RedactionRules),
});
export type RedactionConfig = z.infer<typeof RedactionConfig>;

/**
 * What a redaction removed from one tool call, as recorded with the event it redacted: which of
 * the rules fired (their paths and patterns as configured), never the values.
 */
export const RedactionNote = z.object({
  tool: z.string(),
  field: z.enum(["input", "output"]),
  /** The model's id of the call, for an input (the action has no id yet when the model answers). */
  callId: z.string().optional(),
  /** The action, for an output. */
  actionId: z.string().optional(),
  paths: z.array(z.string()),
  patterns: z.array(z.string()),
});
export type RedactionNote = z.infer<typeof RedactionNote>;
