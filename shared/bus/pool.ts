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

  /**
   * Queues a change; all changes queued while a compare-and-set is in flight go in the next one,
   * in order. One key decides every admission, so a thousand concurrent submits on one replica
   * would otherwise race each other into a thousand retries each (the W1b benchmark at C=1,000).
   */
  private change<R>(decide: (state: PoolState) => { result: R; next?: PoolState }): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ decide, resolve: resolve as (value: unknown) => void, reject });
      if (!this.draining) void this.drain();
    });
  }

  private readonly queue: Pending[] = [];
  private draining = false;

  private async drain(): Promise<void> {
    this.draining = true;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0);
      let outcomes: Outcome[] = [];
      try {
        await casChange(this.deps, POOL_KEY, PoolState, { active: [] }, (state) => {
          outcomes = [];
          let current = state;
          for (const op of batch) {
            try {
              const { result, next } = op.decide(current);
              outcomes.push({ ok: true, value: result });
              if (next) current = next;
            } catch (error) {
              outcomes.push({ ok: false, error });
            }
          }
          return { result: undefined, ...(current !== state ? { next: current } : {}) };
        });
      } catch (error) {
        outcomes = batch.map(() => ({ ok: false, error }));
      }
      batch.forEach((op, i) => {
        const outcome = outcomes[i] as Outcome;
        if (outcome.ok) op.resolve(outcome.value);
        else op.reject(outcome.error);
      });
    }
    this.draining = false;
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

interface Pending {
  decide: (state: PoolState) => { result: unknown; next?: PoolState };
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}
