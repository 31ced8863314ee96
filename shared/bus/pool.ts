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

/** nats-server's default max_payload, for a connection that has not heard the server's. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;
/** Room a KV write's headers take inside max_payload (the expected revision, the subject's). */
const HEADER_ROOM = 1024;

export interface PoolDeps {
  kv: KV;
  clock: Clock;
  random: Random;
  /**
   * The most bytes the ledger's value may take: the server refuses a larger message, and a write
   * that can never succeed would hold up every change queued with it, releases included.
   */
  maxBytes: number;
}

/** The ledger's byte limit on a server whose max_payload is `maxPayload` (the connection's info). */
export function ledgerLimit(maxPayload: number | undefined): number {
  return (maxPayload ?? DEFAULT_MAX_PAYLOAD) - HEADER_ROOM;
}

/** How many run ids of `idLength` characters a ledger of `maxBytes` holds. */
export function ledgerRoom(maxBytes: number, idLength: number): number {
  return Math.floor((maxBytes - EMPTY_BYTES) / entryBytes(idLength));
}

/** `{"active":[]}` */
const EMPTY_BYTES = 13;
/** An id in the ledger's JSON: its quotes and a comma (run ids are ASCII and need no escaping). */
const entryBytes = (idLength: number): number => idLength + 3;

const sizes = new WeakMap<PoolState, number>();

/** The ledger's size as stored; computed once per value read, then carried from change to change. */
function sizeOf(state: PoolState): number {
  let size = sizes.get(state);
  if (size === undefined) {
    size = JSON.stringify(state).length;
    sizes.set(state, size);
  }
  return size;
}

function sized(state: PoolState, size: number): PoolState {
  sizes.set(state, size);
  return state;
}

/**
 * Pool capacity shared by every supervisor replica. Each change reads the ledger, decides, and
 * writes back only if nobody wrote in between (KV revision compare-and-set); a lost race re-reads
 * and decides again, so concurrent admissions on any number of replicas never exceed capacity.
 */
export class PoolLedger {
  constructor(private readonly deps: PoolDeps) {}

  /** The ledger in `bus`'s pool bucket, limited by what its server's max_payload lets one value hold. */
  static of(bus: {
    buckets: { pool: KV };
    clock: Clock;
    random: Random;
    nc: { info?: { max_payload: number } | undefined };
  }): PoolLedger {
    const { buckets, clock, random, nc } = bus;
    return new PoolLedger({ kv: buckets.pool, clock, random, maxBytes: ledgerLimit(nc.info?.max_payload) });
  }

  async active(): Promise<string[]> {
    return (await this.read()).state.active;
  }

  /**
   * Takes a slot for `runId`; a run that already holds one keeps it ("existing"). Refused with
   * POOL_FULL at `capacity`, or sooner when the ledger would outgrow `maxBytes` (a capacity set
   * beyond what one KV value holds).
   */
  acquire(runId: string, capacity: number): Promise<"admitted" | "existing"> {
    return this.change((state) => {
      if (state.active.includes(runId)) return { result: "existing" as const };
      const active = state.active.length;
      if (active >= capacity) {
        throw new AgentError("POOL_FULL", `pool full: ${active} of ${capacity} slots in use`, {
          details: { active, capacity },
        });
      }
      const size = sizeOf(state) + entryBytes(runId.length);
      if (size > this.deps.maxBytes) {
        throw new AgentError(
          "POOL_FULL",
          `pool full: ${active} of ${capacity} slots in use, and the ledger of active runs would outgrow ` +
            `the ${this.deps.maxBytes} bytes one value may take on this server; lower ` +
            `SUPERVISOR_POOL_CAPACITY or raise the server's max_payload`,
          { details: { active, capacity, ledgerBytes: sizeOf(state), maxBytes: this.deps.maxBytes } },
        );
      }
      return { result: "admitted" as const, next: sized({ active: [...state.active, runId] }, size) };
    });
  }

  /** Frees `runId`'s slot; false when it held none (releasing twice is harmless). */
  release(runId: string): Promise<boolean> {
    return this.change((state) => {
      if (!state.active.includes(runId)) return { result: false };
      const next = { active: state.active.filter((id) => id !== runId) };
      return { result: true, next: sized(next, sizeOf(state) - entryBytes(runId.length)) };
    });
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
