import type { KV } from "@nats-io/kv";
import { z } from "zod";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { casChange } from "./cas.js";
import { decode } from "./codec.js";
import { KnownRevisions } from "./known-revisions.js";

/**
 * The runs holding a pool slot; one key, so one compare-and-set decides every admission.
 * `resumedAfter` names, for a run resumed after a halt, the run log sequence of the halt its
 * slot follows: a lifecycle event at or before it belongs to the slot the run held before (a
 * `run.halted` delivered again after its release), and must not free the one it holds now.
 */
export const PoolState = z.object({
  active: z.array(z.string()),
  resumedAfter: z.record(z.string(), z.number().int().nonnegative()).optional(),
});
export type PoolState = z.infer<typeof PoolState>;

/** What a release did: freed the run's slot, found none, or found one its event is older than. */
export type ReleaseOutcome = "released" | "absent" | "earlier";

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
/** `,"resumedAfter":{}` */
const RESUMED_BYTES = 18;
/** A `resumedAfter` member: the quoted id, a colon, the sequence's digits, a comma. */
const resumedBytes = (idLength: number, seq: number): number => idLength + 4 + String(seq).length;

/** A change to the ledger, as queued: applied with the others of its batch to one working set. */
type PoolOp =
  | { kind: "acquire"; runId: string; capacity: number; after?: number }
  | { kind: "release"; runId: string; eventSeq?: number };

/**
 * The ledger while a batch of changes is applied to it: a set, so a batch of k changes on a
 * ledger of n runs costs O(n + k), not O(n) per change (an array's `includes` and `filter`).
 */
class WorkingLedger {
  readonly ids: Set<string>;
  readonly after: Map<string, number>;
  /** The ledger's size as stored (an upper bound by one comma), kept as ids come and go. */
  size: number;
  changed = false;

  constructor(state: PoolState) {
    this.ids = new Set(state.active);
    this.after = new Map(Object.entries(state.resumedAfter ?? {}).filter(([id]) => this.ids.has(id)));
    this.size = EMPTY_BYTES + (this.after.size > 0 ? RESUMED_BYTES : 0);
    for (const id of this.ids) this.size += entryBytes(id.length);
    for (const [id, seq] of this.after) this.size += resumedBytes(id.length, seq);
  }

  /** The ledger as stored. */
  state(): PoolState {
    const active = [...this.ids];
    return this.after.size > 0 ? { active, resumedAfter: Object.fromEntries(this.after) } : { active };
  }

  /** Applies one change; a refusal throws and leaves the ledger as it was. */
  apply(op: PoolOp, maxBytes: number): "admitted" | "existing" | ReleaseOutcome {
    return op.kind === "release" ? this.release(op) : this.acquire(op, maxBytes);
  }

  private release(op: Extract<PoolOp, { kind: "release" }>): ReleaseOutcome {
    const { runId, eventSeq } = op;
    if (!this.ids.has(runId)) return "absent";
    const after = this.after.get(runId);
    if (after !== undefined && eventSeq !== undefined && eventSeq <= after) return "earlier";
    this.ids.delete(runId);
    this.size -= entryBytes(runId.length);
    this.setAfter(runId, undefined);
    this.changed = true;
    return "released";
  }

  private acquire(op: Extract<PoolOp, { kind: "acquire" }>, maxBytes: number): "admitted" | "existing" {
    const { runId, capacity, after } = op;
    const held = this.ids.has(runId);
    const active = this.ids.size;
    if (!held && active >= capacity) {
      throw new AgentError("POOL_FULL", `pool full: ${active} of ${capacity} slots in use`, {
        details: { active, capacity },
      });
    }
    if (held && after === undefined) return "existing";
    const was = { after: this.after.get(runId), changed: this.changed };
    if (after !== undefined) this.setAfter(runId, after);
    const size = this.size + (held ? 0 : entryBytes(runId.length));
    if (size > maxBytes) {
      this.setAfter(runId, was.after);
      this.changed = was.changed;
      throw new AgentError(
        "POOL_FULL",
        `pool full: ${active} of ${capacity} slots in use, and the ledger of active runs would outgrow ` +
          `the ${maxBytes} bytes one value may take on this server; lower ` +
          `SUPERVISOR_POOL_CAPACITY or raise the server's max_payload`,
        { details: { active, capacity, ledgerBytes: this.size, maxBytes } },
      );
    }
    if (held) return "existing";
    this.ids.add(runId);
    this.size = size;
    this.changed = true;
    return "admitted";
  }

  /** Marks (or, with undefined, unmarks) `runId`'s slot as taken after a halt, its size counted. */
  private setAfter(runId: string, after: number | undefined): void {
    const old = this.after.get(runId);
    if (old === after) return;
    if (old !== undefined) {
      this.size -= resumedBytes(runId.length, old);
      this.after.delete(runId);
      if (this.after.size === 0) this.size -= RESUMED_BYTES;
    }
    if (after !== undefined) {
      if (this.after.size === 0) this.size += RESUMED_BYTES;
      this.after.set(runId, after);
      this.size += resumedBytes(runId.length, after);
    }
    this.changed = true;
  }
}

/**
 * Pool capacity shared by every supervisor replica. Each change reads the ledger, decides, and
 * writes back only if nobody wrote in between (KV revision compare-and-set); a lost race re-reads
 * and decides again, so concurrent admissions on any number of replicas never exceed capacity.
 */
export class PoolLedger {
  /** The deps, and the ledger as this process last wrote it: its next change is one write (see KnownRevisions). */
  private readonly deps: PoolDeps & { known: KnownRevisions<PoolState> };

  constructor(deps: PoolDeps) {
    this.deps = { ...deps, known: new KnownRevisions(1) };
  }

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

  /** `runId`'s slot: undefined when it holds none; `after`, the halt a resume took it after (see acquire). */
  async slotOf(runId: string): Promise<{ after?: number } | undefined> {
    const { state } = await this.read();
    if (!state.active.includes(runId)) return undefined;
    const after = state.resumedAfter?.[runId];
    return after === undefined ? {} : { after };
  }

  /**
   * Takes a slot for `runId`; a run that already holds one keeps it ("existing"). Refused with
   * POOL_FULL at `capacity`, or sooner when the ledger would outgrow `maxBytes` (a capacity set
   * beyond what one KV value holds).
   */
  acquire(
    runId: string,
    capacity: number,
    options: { after?: number } = {},
  ): Promise<"admitted" | "existing"> {
    const op: PoolOp = { kind: "acquire", runId, capacity, ...options };
    return this.change(op) as Promise<"admitted" | "existing">;
  }

  /**
   * Frees `runId`'s slot ("absent" when it holds none: releasing twice is harmless). With the
   * run log sequence of the lifecycle message that asks for it, a slot taken by a resume after
   * that event is kept ("earlier"): the event is a late delivery of one its old slot already answered.
   */
  release(runId: string, eventSeq?: number): Promise<ReleaseOutcome> {
    const op: PoolOp = { kind: "release", runId, ...(eventSeq === undefined ? {} : { eventSeq }) };
    return this.change(op) as Promise<ReleaseOutcome>;
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
  private change(op: PoolOp): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ op, resolve, reject });
      if (!this.draining) void this.drain();
    });
  }

  private readonly queue: Pending[] = [];
  private draining = false;

  private async drain(): Promise<void> {
    this.draining = true;
    const { maxBytes } = this.deps;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0);
      let outcomes: Outcome[] = [];
      try {
        await casChange(this.deps, POOL_KEY, PoolState, { active: [] }, (state) => {
          const ledger = new WorkingLedger(state);
          outcomes = batch.map(({ op }) => {
            try {
              return { ok: true, value: ledger.apply(op, maxBytes) };
            } catch (error) {
              return { ok: false, error };
            }
          });
          return { result: undefined, ...(ledger.changed ? { next: ledger.state() } : {}) };
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
  op: PoolOp;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}
