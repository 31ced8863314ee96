import { JetStreamApiError } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { InvalidArgumentError } from "@nats-io/transport-node";
import type { z } from "zod";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";
import { decode, encodeParsed } from "./codec.js";
import { storageFull } from "./storage-full.js";
import type { KnownRevisions, KnownValue } from "./known-revisions.js";

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
 * the next value; it may throw to refuse (the refusal is decided on fresh state). It must not
 * change the state it is given, and may be called more than once.
 *
 * With `deps.known`, a change of a key this process wrote last is decided on the value it wrote and
 * written against that revision without reading the key first. Only a write that goes through
 * makes that decision final: a refusal, or nothing to change, is decided again on a fresh read,
 * and so is everything after a refused write.
 *
 * A write whose answer never came (a timeout, a connection lost while the server restarts) may
 * have landed: deciding again on a value that holds it would apply the change twice (a slot
 * taken once and counted twice). So the key is read again first, and when it holds exactly what
 * was written, at a later revision, the write landed and its result stands. Only a change by
 * someone else on top of it, before that read, is not recognised.
 */
export async function casChange<S extends z.ZodType, R>(
  deps: CasDeps & { known?: KnownRevisions<z.output<S>> },
  key: string,
  schema: S,
  empty: z.output<S>,
  decide: (state: z.output<S>) => { result: R; next?: z.input<S> },
): Promise<R> {
  const { known } = deps;
  let fresh = false;
  let unheard: Unheard<R> | undefined;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const cached = fresh || unheard ? undefined : known?.usable(key);
    const base = cached ?? (await read(deps.kv, key, schema, empty));
    if (!cached) known?.compare(key, base.revision);
    if (unheard && landed(unheard, base)) {
      known?.remember(key, base.revision, base.state);
      return unheard.result;
    }
    unheard = undefined;
    const decision = cached ? tryDecide(decide, base.state) : decide(base.state);
    if (decision === undefined || (cached && decision.next === undefined)) {
      fresh = true;
      continue;
    }
    const { result, next } = decision;
    if (next === undefined) return result;
    const { data, value } = encodeParsed(schema, next);
    try {
      const revision = await write(deps.kv, key, data, base.revision);
      if (cached) known?.observe(true);
      known?.remember(key, revision, value);
      return result;
    } catch (err) {
      known?.forget(key);
      if (!refused(err, key, data.length)) unheard = { data, after: base.revision, result };
      else if (cached) {
        // Someone else wrote the key since this process did: not a race to back off from.
        known?.observe(false);
        fresh = true;
        continue;
      }
      // Another replica wrote first (or no answer came): read again, and decide again unless it landed.
      await deps.clock.sleep(fullJitterDelay(Math.min(attempt, 6), BACKOFF, deps.random));
    }
  }
  throw new AgentError("INTERNAL", `key '${key}' still contended after ${MAX_ATTEMPTS} attempts`);
}

/** A write sent whose answer never came, on the key's value at revision `after`. */
interface Unheard<R> {
  data: Uint8Array;
  after: number;
  result: R;
}

/** What the key was read as, with the bytes it holds (none when it holds no value). */
type Read<T> = KnownValue<T> & { data?: Uint8Array };

/** The key's value and revision; a key never written, deleted or purged has the empty value. */
async function read<S extends z.ZodType>(
  kv: KV,
  key: string,
  schema: S,
  empty: z.output<S>,
): Promise<Read<z.output<S>>> {
  const entry = await kv.get(key);
  if (entry?.operation !== "PUT") return { state: empty, revision: entry?.revision ?? 0 };
  return { state: decode(schema, entry.value), revision: entry.revision, data: entry.value };
}

/** The write went through: the key holds its very bytes, written after the value it was decided on. */
function landed(write: Unheard<unknown>, now: Read<unknown>): boolean {
  return now.revision > write.after && now.data !== undefined && Buffer.compare(now.data, write.data) === 0;
}

/**
 * True when the server answered the write and refused it (a revision moved on): it did not land.
 * False when no answer came (a timeout, a connection that dropped): it may have. Throws what
 * every attempt would meet the same way: a value the client cannot send, a store with no room.
 */
function refused(err: unknown, key: string, bytes: number): boolean {
  refuseUnsendable(err, key, bytes);
  const full = storageFull(`writing key '${key}'`, err);
  if (full) throw full;
  return err instanceof JetStreamApiError || (err instanceof Error && err.cause instanceof JetStreamApiError);
}

/**
 * Writes only if the key's last revision is still `revision` (0: never written); a deleted or
 * purged key's last revision is its marker's. Resolves with the write's revision.
 */
function write(kv: KV, key: string, data: Uint8Array, revision: number): Promise<number> {
  return revision === 0 ? kv.create(key, data) : kv.update(key, data, revision);
}

/** A decision on a value not read back: a refusal is not final, so it only asks for a read. */
function tryDecide<T, D>(decide: (state: T) => D, state: T): D | undefined {
  try {
    return decide(state);
  } catch {
    return undefined;
  }
}

/**
 * The client refuses what it can never send (a value over the server's max_payload) before
 * sending it: every attempt would be refused the same way.
 */
function refuseUnsendable(err: unknown, key: string, bytes: number): void {
  if (!(err instanceof InvalidArgumentError)) return;
  const code = err.message.includes("max_payload") ? "PAYLOAD_TOO_LARGE" : "INVALID_INPUT";
  throw new AgentError(code, `key '${key}': ${bytes} bytes: ${err.message}`, { cause: err });
}
