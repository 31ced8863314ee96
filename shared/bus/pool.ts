import type { KV } from "@nats-io/kv";
import { z } from "zod";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { casChange } from "./cas.js";
import { decode } from "./codec.js";

/** The runs holding a pool slot; one key, so one compare-and-set decides every admission. */
export const PoolState = z.object({ active: z.array(z.string()) });
export type PoolState = z.infer<typeof PoolState>;

export const POOL_KEY = "active";

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

  private async read(): Promise<{ state: PoolState }> {
    const entry = await this.deps.kv.get(POOL_KEY);
    if (!entry || entry.operation !== "PUT") return { state: { active: [] } };
    return { state: decode(PoolState, entry.value) };
  }

  private change<R>(decide: (state: PoolState) => { result: R; next?: PoolState }): Promise<R> {
    return casChange(this.deps, POOL_KEY, PoolState, { active: [] }, decide);
  }
}
