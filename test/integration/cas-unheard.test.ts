import type { KV } from "@nats-io/kv";
import { TimeoutError } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { casChange } from "../../shared/bus/cas.js";
import { TreeBudget } from "../../shared/bus/tree-budget.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { useBusSuite } from "../helpers/bus-suite.js";

/**
 * Compare-and-set writes whose answer never came, on a real server: the write reaches the bucket
 * (or not), and the client hears a timeout, as when nats-server restarts under a supervisor. A
 * write that landed must count once, and one that did not must still be made.
 */
const suite = useBusSuite("cu");

type Fault = "lands" | "lost" | "ok";

/**
 * The pool bucket, with its next writes (create or update) going as `plan` says: `lands` is
 * written and then answered with a timeout, `lost` is answered with a timeout and never sent.
 */
function unheardWrites(kv: KV, plan: Fault[]): KV & { writes: number } {
  let writes = 0;
  const faulty =
    (write: "create" | "update") =>
    async (...args: unknown[]): Promise<number> => {
      writes += 1;
      const fault = plan.shift() ?? "ok";
      if (fault === "lost") throw new TimeoutError();
      const revision = await (kv[write] as (...a: unknown[]) => Promise<number>).apply(kv, args);
      if (fault === "lands") throw new TimeoutError();
      return revision;
    };
  const overrides = { create: faulty("create"), update: faulty("update") };
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === "writes") return writes;
      if (prop === "create" || prop === "update") return overrides[prop];
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as KV & { writes: number };
}

const budgetWith = (kv: KV, seed: number): TreeBudget =>
  new TreeBudget({ kv, clock: systemClock, random: seededRandom(seed) });

const Counter = z.object({ n: z.number().int() });
const increment = (kv: KV, key: string): Promise<number> =>
  casChange({ kv, clock: systemClock, random: seededRandom(1) }, key, Counter, { n: 0 }, (s) => ({
    result: s.n + 1,
    next: { n: s.n + 1 },
  }));

describe("a compare-and-set write whose answer never came", () => {
  it("a tree's first lease lands unheard: granted once, counted once", async () => {
    const kv = unheardWrites(suite.buckets.pool, ["lands"]);
    const budget = budgetWith(kv, 1);
    expect(await budget.lease("u1", "u1", 3, 10)).toEqual({ granted: 3, used: 3, returned: 0 });
    expect(await budget.used("u1")).toBe(3);
    // The landed write was recognised on the read after it: nothing was written twice.
    expect(kv.writes).toBe(1);
  });

  it("a later lease and a give-back land unheard: each counts once, and the tree goes on from there", async () => {
    const kv = unheardWrites(suite.buckets.pool, ["ok", "lands", "lands"]);
    const budget = budgetWith(kv, 2);
    await budget.lease("u2", "u2", 2, 10, 0);
    expect(await budget.lease("u2", "u2", 4, 10, 2)).toEqual({ granted: 4, used: 6, returned: 0 });
    // Paid 6, spent 3: a give-back that says so takes back three, once.
    expect(await budget.giveBack("u2", "u2", 3, 3)).toEqual({ used: 3, returned: 3 });
    expect(await budget.used("u2")).toBe(3);
    expect(await budget.lease("u2", "u2", 1, 10, 3)).toEqual({ granted: 1, used: 4, returned: 0 });
  });

  it("a give-back of a copy's worker (no count) lands unheard: it takes back once", async () => {
    const kv = unheardWrites(suite.buckets.pool, ["ok", "lands"]);
    const budget = budgetWith(kv, 3);
    await budget.lease("u3", "u3", 4, 10, 0);
    // Without a count, a give-back takes what it offers out of the run's paid iterations: taken
    // twice it would return four of the four.
    expect(await budget.giveBack("u3", "u3", 2)).toEqual({ used: 2, returned: 2 });
    expect(await budget.used("u3")).toBe(2);
  });

  it("a write lost before it landed is decided again and made once", async () => {
    const kv = unheardWrites(suite.buckets.pool, ["ok", "lost"]);
    const budget = budgetWith(kv, 4);
    await budget.lease("u4", "u4", 1, 10, 0);
    expect(await budget.lease("u4", "u4", 2, 10, 1)).toEqual({ granted: 2, used: 3, returned: 0 });
    expect(await budget.used("u4")).toBe(3);
    expect(kv.writes).toBe(3);
  });

  it("any value changed with casChange: a run of unheard writes, landed or not, counts each change once", async () => {
    const plan: Fault[] = ["lands", "lost", "lands", "ok", "lost", "lost", "lands", "ok"];
    const kv = unheardWrites(suite.buckets.pool, [...plan]);
    const results: number[] = [];
    for (let i = 0; i < 5; i++) results.push(await increment(kv, "counter.u5"));
    expect(results).toEqual([1, 2, 3, 4, 5]);
    const entry = await suite.buckets.pool.get("counter.u5");
    expect(entry && Counter.parse(entry.json())).toEqual({ n: 5 });
    // A lost write is written again; a landed one is not.
    expect(kv.writes).toBe(plan.length);
  });
});
