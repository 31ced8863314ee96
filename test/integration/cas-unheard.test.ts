import type { KV } from "@nats-io/kv";
import { TimeoutError } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { casChange } from "../../shared/bus/cas.js";
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

const Counter = z.object({ n: z.number().int() });
const increment = (kv: KV, key: string): Promise<number> =>
  casChange({ kv, clock: systemClock, random: seededRandom(1) }, key, Counter, { n: 0 }, (s) => ({
    result: s.n + 1,
    next: { n: s.n + 1 },
  }));

describe("a compare-and-set write whose answer never came", () => {
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
