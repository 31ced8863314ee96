import type { KV } from "@nats-io/kv";
import { InvalidArgumentError } from "@nats-io/transport-node";
import type { z } from "zod";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";
import { decode, encode } from "./codec.js";

const MAX_ATTEMPTS = 200;
const BACKOFF = { baseDelayMs: 2, maxDelayMs: 100 };

export interface CasDeps {
  kv: KV;
  clock: Clock;
  random: Random;
}

/**
 * Read, decide, write back only if nobody wrote in between (KV revision compare-and-set); a lost
 * race reads again and decides again. `decide` returns the result and, when something changes,
 * the next value; it may throw to refuse (the refusal is decided on fresh state).
 */
export async function casChange<S extends z.ZodType, R>(
  deps: CasDeps,
  key: string,
  schema: S,
  empty: z.output<S>,
  decide: (state: z.output<S>) => { result: R; next?: z.input<S> },
): Promise<R> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const entry = await deps.kv.get(key);
    const held = entry?.operation === "PUT";
    const state = held ? decode(schema, entry.value) : empty;
    const { result, next } = decide(state);
    if (next === undefined) return result;
    const data = encode(schema, next);
    try {
      if (!held) await deps.kv.create(key, data);
      else await deps.kv.update(key, data, entry.revision);
      return result;
    } catch (err) {
      // The client refuses what it can never send (a value over the server's max_payload) before
      // sending it: every attempt would be refused the same way.
      if (err instanceof InvalidArgumentError) {
        const tooLarge = err.message.includes("max_payload");
        throw new AgentError(
          tooLarge ? "PAYLOAD_TOO_LARGE" : "INVALID_INPUT",
          `key '${key}': ${data.length} bytes: ${err.message}`,
          { cause: err },
        );
      }
      // Another replica wrote first (or the write timed out): read again and decide again.
      await deps.clock.sleep(fullJitterDelay(Math.min(attempt, 6), BACKOFF, deps.random));
    }
  }
  throw new AgentError("INTERNAL", `key '${key}' still contended after ${MAX_ATTEMPTS} attempts`);
}
