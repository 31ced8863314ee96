import { describe, expect, it } from "vitest";
import { readBucket } from "../../shared/bus/bucket-read.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("bucketread");

async function readAll(): Promise<{ entries: Map<string, string>; ms: number }> {
  const began = Date.now();
  const entries = new Map<string, string>();
  for await (const { key, data } of readBucket(suite.jsm, suite.subjects.buckets().modelBreakers))
    entries.set(key, new TextDecoder().decode(data));
  return { entries, ms: Date.now() - began };
}

describe("reading a whole KV bucket", () => {
  it("gives every live key at its latest value, leaves deleted and purged keys out, and ends while a key is rewritten all along", async () => {
    const kv = suite.buckets.modelBreakers;
    await kv.put("steady", "s1");
    await kv.put("steady", "s2");
    await kv.put("gone", "g");
    await kv.delete("gone");
    await kv.put("purged", "p");
    await kv.purge("purged");
    expect((await readAll()).entries).toEqual(new Map([["steady", "s2"]]));

    // A breaker tried again every few milliseconds, as an outage does every cooldown.
    // Written once before the reads begin: a put not yet acknowledged may not be there to read.
    await kv.put("hot", "h0");
    let rewriting = true;
    let revision = 0;
    const rewriter = (async () => {
      while (rewriting) {
        await kv.put("hot", `h${++revision}`);
        await systemClock.sleep(5);
      }
    })();
    try {
      // At least 20 reads, and on until the key has been rewritten 100 times.
      for (let i = 0; i < 20 || revision < 100; i++) {
        const { entries, ms } = await readAll();
        expect([...entries.keys()].sort()).toEqual(["hot", "steady"]);
        expect(entries.get("hot")).toMatch(/^h\d+$/);
        // A read ends where the server's count says, not by waiting for a quiet moment.
        expect(ms).toBeLessThan(2_000);
      }
    } finally {
      rewriting = false;
      await rewriter;
    }
    expect(revision).toBeGreaterThanOrEqual(100);
  }, 60_000);
});
