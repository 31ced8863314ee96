import type { z } from "zod";
import { AgentError } from "../runtime/errors.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * Every payload on the wire goes through here: encode validates what we send, decode validates
 * what we receive. A bad payload becomes an INVALID_INPUT error with the zod issues, never an
 * exception from deep inside a handler.
 */
export function encode<S extends z.ZodType>(schema: S, value: z.input<S>): Uint8Array {
  return encodeParsed(schema, value).data;
}

/** `encode`, with the value as the schema parsed it: what a reader of the bytes will decode. */
export function encodeParsed<S extends z.ZodType>(
  schema: S,
  value: z.input<S>,
): { data: Uint8Array; value: z.output<S> } {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new AgentError("INTERNAL", `refusing to send an invalid payload: ${parsed.error.message}`, {
      details: parsed.error.issues,
    });
  }
  return { data: encoder.encode(JSON.stringify(parsed.data)), value: parsed.data };
}

/**
 * A payload this process built from values it validated or made itself, sent without parsing it
 * again: its reader validates it where it enters (see decode). For hot paths; a payload built from
 * anything unchecked goes through `encode`.
 */
export function encodeOwn<S extends z.ZodType>(_schema: S, value: z.output<S>): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

/** The same check for JSON that arrives as text (a model turn's content, an environment variable). */
export function decodeText<S extends z.ZodType>(schema: S, text: string): z.output<S> {
  return decode(schema, encoder.encode(text));
}

export function decode<S extends z.ZodType>(schema: S, data: Uint8Array): z.output<S> {
  let text: string;
  let raw: unknown;
  try {
    text = decoder.decode(data);
    raw = JSON.parse(text) as unknown;
  } catch (cause) {
    throw new AgentError("INVALID_INPUT", "payload is not valid UTF-8 JSON", { cause });
  }
  return validate(schema, raw);
}

/** The check `decode` makes, for a value parsed from the wire and transformed before it is checked. */
export function validate<S extends z.ZodType>(schema: S, raw: unknown): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new AgentError("INVALID_INPUT", `payload does not match the schema: ${parsed.error.message}`, {
      details: parsed.error.issues,
    });
  }
  return parsed.data;
}
