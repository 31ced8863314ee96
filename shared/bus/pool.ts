import type { KV } from "@nats-io/kv";
import { z } from "zod";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";
import { decode, encode } from "./codec.js";

/** The runs holding a pool slot; one key, so one compare-and-set decides every admission. */
export const PoolState = z.object({ active: z.array(z.string()) });
export type PoolState = z.infer<typeof PoolState>;

export const POOL_KEY = "active";
const MAX_ATTEMPTS = 200;
const BACKOFF = { baseDelayMs: 2, maxDelayMs: 100 };

export interface PoolDeps {
  kv: KV;
  clock: Clock;
  random: Random;
}

/**
 * Pool capacity shared by every supervisor replica. Each change reads the ledger, decides, and
 * writes back only if nobody wrote in between (KV revision compare-and-set); a lost race re-reads
 * and decides again, so concurrent admissions on any number of replicas never exceed capacity.
 */
export class PoolLedger {
  constructor(private readonly deps: PoolDeps) {}

  async active(): Promise<string[]> {
    return (await this.read()).state.active;
  }

  /** Takes a slot for `runId`; a run that already holds one keeps it ("existing"). */
  acquire(runId: string, capacity: number): Promise<"admitted" | "existing"> {
    return this.change((state) => {
      if (state.active.includes(runId)) return { result: "existing" as const };
      if (state.active.length >= capacity) {
        throw new AgentError("POOL_FULL", `pool full: ${state.active.length} of ${capacity} slots in use`, {
          details: { active: state.active.length, capacity },
        });
      }
      return { result: "admitted" as const, next: { active: [...state.active, runId] } };
    });
  }

  /** Frees `runId`'s slot; false when it held none (releasing twice is harmless). */
  release(runId: string): Promise<boolean> {
    return this.change((state) =>
      state.active.includes(runId)
        ? { result: true, next: { active: state.active.filter((id) => id !== runId) } }
        : { result: false },
    );
  }

  private async read(): Promise<{ state: PoolState; revision: number }> {
    const entry = await this.deps.kv.get(POOL_KEY);
    if (!entry || entry.operation !== "PUT") return { state: { active: [] }, revision: 0 };
    return { state: decode(PoolState, entry.value), revision: entry.revision };
  }

  private async change<R>(decide: (state: PoolState) => { result: R; next?: PoolState }): Promise<R> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { state, revision } = await this.read();
      const { result, next } = decide(state);
      if (!next) return result;
      const data = encode(PoolState, next);
      try {
        if (revision === 0) await this.deps.kv.create(POOL_KEY, data);
        else await this.deps.kv.update(POOL_KEY, data, revision);
        return result;
      } catch {
        // Another replica wrote first (or the write timed out): read again and decide again.
        await this.deps.clock.sleep(fullJitterDelay(Math.min(attempt, 6), BACKOFF, this.deps.random));
      }
    }
    throw new AgentError("INTERNAL", `pool ledger still contended after ${MAX_ATTEMPTS} attempts`);
  }
}
