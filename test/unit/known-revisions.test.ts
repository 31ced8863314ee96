import { describe, expect, it } from "vitest";
import { KnownRevisions } from "../../shared/bus/known-revisions.js";

describe("KnownRevisions", () => {
  it("keeps the keys written last, up to its bound", () => {
    const known = new KnownRevisions<string>(3);
    for (const [i, key] of ["a", "b", "c"].entries()) known.remember(key, i + 1, key);
    known.remember("a", 10, "a2"); // written again: now the newest
    known.remember("d", 11, "d");
    expect(known.usable("b")).toBeUndefined();
    expect(["a", "c", "d"].map((key) => known.usable(key))).toEqual([
      { revision: 10, state: "a2" },
      { revision: 3, state: "c" },
      { revision: 11, state: "d" },
    ]);
    known.forget("c");
    expect(known.usable("c")).toBeUndefined();
  });

  it("offers its values only while they have been current at least half the time", () => {
    const known = new KnownRevisions<number>();
    known.remember("k", 5, 0);
    let stale = 0;
    while (known.usable("k")) {
      known.observe(false);
      stale += 1;
    }
    expect(stale).toBe(11); // 1 × (15/16)^11 < 0.5
    for (let i = 0; i < 20; i++) known.observe(false);
    // Reads that find the key where this process left it bring its values back.
    let current = 0;
    while (!known.usable("k")) {
      known.compare("k", 5);
      current += 1;
    }
    expect(current).toBe(9); // from (15/16)^31: 1 − (1 − 0.135) × (15/16)^9 ≥ 0.5
    // A read that finds another revision counts as stale; a key not known counts as nothing.
    known.compare("k", 6);
    expect(known.usable("k")).toBeUndefined();
    for (let i = 0; i < 50; i++) known.compare("other", 1);
    expect(known.usable("k")).toBeUndefined();
  });
});
