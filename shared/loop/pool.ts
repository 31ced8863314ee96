import type { RunSpec, RunSpecInput } from "../contracts/run-spec.js";
import { AgentError, toAgentError } from "../runtime/errors.js";
import type { IdGenerator } from "../runtime/ids.js";

export type RunFn<R> = (spec: RunSpecInput | RunSpec, runId: string) => Promise<R>;

export type Settled<R> = { ok: true; value: R } | { ok: false; error: AgentError };

/**
 * A bounded pool of in-process agent runs. A spawn beyond capacity is refused (POOL_FULL, a
 * circuit break for the caller); a fan-out is all-or-nothing; joinAll returns one result per run.
 * The cluster enforces the same bound across processes with compare-and-set on the pool bucket.
 */
export class AgentPool<R> {
  private readonly running = new Map<string, Promise<Settled<R>>>();
  private active = 0;

  constructor(
    readonly maxConcurrent: number,
    private readonly runFn: RunFn<R>,
    private readonly ids: IdGenerator,
  ) {}

  activeCount(): number {
    return this.active;
  }

  spawn(spec: RunSpecInput | RunSpec, runId?: string): string {
    if (this.active >= this.maxConcurrent) {
      throw new AgentError(
        "POOL_FULL",
        `circuit break: pool full (${this.active}/${this.maxConcurrent} agents active)`,
      );
    }
    const id = runId ?? this.ids.next("agent");
    this.active++;
    const settled = this.runFn(spec, id).then(
      (value): Settled<R> => ({ ok: true, value }),
      (err: unknown): Settled<R> => ({ ok: false, error: toAgentError(err) }),
    );
    this.running.set(
      id,
      settled.finally(() => {
        this.active--;
      }),
    );
    return id;
  }

  /** Spawns every spec or none: a fan-out that does not fit is refused whole. */
  fanOut(specs: readonly (RunSpecInput | RunSpec)[]): string[] {
    if (this.active + specs.length > this.maxConcurrent) {
      throw new AgentError(
        "POOL_FULL",
        `circuit break: fan-out of ${specs.length} does not fit (${this.active}/${this.maxConcurrent} active)`,
      );
    }
    return specs.map((spec) => this.spawn(spec));
  }

  /** Waits for the given runs (all spawned ones by default) and returns one result per run. */
  async joinAll(ids: readonly string[] = [...this.running.keys()]): Promise<Map<string, Settled<R>>> {
    const results = new Map<string, Settled<R>>();
    for (const id of ids) {
      const run = this.running.get(id);
      if (!run) continue;
      results.set(id, await run);
      this.running.delete(id);
    }
    return results;
  }
}
