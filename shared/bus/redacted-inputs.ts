import type { KV } from "@nats-io/kv";
import { z } from "zod";
import type { Clock } from "../runtime/clock.js";
import type { Random } from "../runtime/random.js";
import { decode, encode } from "./codec.js";
import { withBusRetry } from "./retry.js";

/** How long the bucket keeps a redacted input no call answered: its `max_age` when provisioning creates it. */
export const REDACTED_INPUTS_MAX_AGE_MS = 7 * 24 * 3_600_000;

/** One tool call's input as the model gave it, before redaction kept it out of the run's log. */
export const RedactedInput = z.object({ schemaVersion: z.literal(1), input: z.unknown() });
export type RedactedInput = z.infer<typeof RedactedInput>;

/**
 * The inputs redaction kept out of a run's log, outside the log, by call (`<iteration>:<call id>`:
 * a model's call ids are unique within one response only): whichever worker sends the call (a
 * takeover, a drain's successor, the lease continuing an approved call) sends it with the model's
 * own input.
 */
export interface RedactedInputs {
  keep(call: string, input: unknown): Promise<void>;
  /** The kept input, or undefined when there is none (never kept, answered, or past the bucket's max_age). */
  read(call: string): Promise<{ input: unknown } | undefined>;
  forget(call: string): Promise<void>;
}

/** A call's key: the run, then the call in base64url (a model's ids may hold any character). */
export function redactedInputKey(runId: string, call: string): string {
  return `${runId}.c${Buffer.from(call).toString("base64url")}`;
}

/** One run's redacted inputs in the `<prefix>-redacted-inputs` bucket, which only agent workers may read. */
export function runRedactedInputs(
  bucket: KV,
  runId: string,
  deps: { clock: Clock; random: Random },
): RedactedInputs {
  const key = (call: string) => redactedInputKey(runId, call);
  return {
    async keep(call, input) {
      const value = encode(RedactedInput, { schemaVersion: 1, input });
      await withBusRetry(`keeping the redacted input of ${key(call)}`, deps, () =>
        bucket.put(key(call), value),
      );
    },
    async read(call) {
      const entry = await withBusRetry(`reading ${key(call)}`, deps, () => bucket.get(key(call)));
      if (entry?.operation !== "PUT") return undefined;
      return { input: decode(RedactedInput, entry.value).input };
    },
    async forget(call) {
      await withBusRetry(`forgetting ${key(call)}`, deps, () => bucket.purge(key(call)));
    },
  };
}
