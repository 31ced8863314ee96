import { describe, expect, it } from "vitest";
import { foldedStacks, inclusiveTimes, summarise, type CpuProfile, type ProfileNode } from "./cpuprofile.ts";
import { colourOf, flameGraph } from "./flame.ts";

const frame = (id: number, functionName: string, url: string, children: number[] = []): ProfileNode => ({
  id,
  callFrame: { functionName, url, lineNumber: id },
  children,
});

/**
 * root → main (dist) → hash (dist) and → publish (nats); plus idle. Samples at 1,100 (main),
 * 1,200 / 1,300 / 1,400 (hash), 1,700 / 1,800 (publish), 1,900 / 2,000 (idle), 2,100 / 2,200
 * (hash); the profile ends at 2,300. The 300 µs gap after 1,400 belongs to hash if a sample is
 * weighted by the time to the next, to publish if by the time since the last.
 */
const profile: CpuProfile = {
  nodes: [
    frame(1, "(root)", "", [2, 5]),
    frame(2, "main", "file:///app/dist/services/agent/drive.js", [3, 4]),
    frame(3, "hash", "file:///app/dist/shared/runtime/hash.js"),
    frame(4, "publish", "file:///app/node_modules/@nats-io/nats-core/lib/nats.js"),
    frame(5, "(idle)", ""),
  ],
  startTime: 1_000,
  endTime: 2_300,
  samples: [2, 3, 3, 3, 4, 4, 5, 5, 3, 3],
  timeDeltas: [100, 100, 100, 100, 300, 100, 100, 100, 100, 100],
};

describe("CPU profiles", () => {
  it("folds stacks root first, weighting each sample by the time to the next, without idle", () => {
    const folded = foldedStacks(profile);
    expect(Object.fromEntries(folded)).toEqual({
      "main dist/services/agent/drive.js:3": 100,
      "main dist/services/agent/drive.js:3;hash dist/shared/runtime/hash.js:4": 700,
      "main dist/services/agent/drive.js:3;publish @nats-io/nats-core:5": 200,
    });
  });

  it("keeps only the samples inside a window", () => {
    // The window [1,250, 1,950) holds the samples at 1,300 and 1,400 (hash: 100 + 300 µs), 1,700
    // and 1,800 (publish) and 1,900 (idle).
    const window = { fromUs: 1_250, toUs: 1_950 };
    const folded = foldedStacks(profile, window);
    expect(Object.fromEntries(folded)).toEqual({
      "main dist/services/agent/drive.js:3;hash dist/shared/runtime/hash.js:4": 400,
      "main dist/services/agent/drive.js:3;publish @nats-io/nats-core:5": 200,
    });
    const summary = summarise(profile, window);
    expect(summary.busyUs).toBe(600);
    expect(summary.idleUs).toBe(100);
    expect(summary.byPlace.get("@nats-io/nats-core")).toBe(200);
  });
});

describe("flame graph", () => {
  it("draws each frame as wide as its inclusive time, callees above their caller", () => {
    const svg = flameGraph(foldedStacks(profile), { title: "test <1>", width: 800, minWidthPx: 0 });
    expect(svg).toContain("test &#60;1&#62;");
    const rect = (name: string): { x: number; y: number; w: number } => {
      const m = new RegExp(
        `<title>${name}[^<]*</title><rect x="([\\d.]+)" y="(\\d+)" width="([\\d.]+)"`,
      ).exec(svg);
      if (!m) throw new Error(`no frame ${name}`);
      return { x: Number(m[1]), y: Number(m[2]), w: Number(m[3]) };
    };
    const all = rect("all");
    const main = rect("main");
    const hash = rect("hash");
    const publish = rect("publish");
    expect(all.w).toBe(800);
    expect(main.w).toBe(800);
    expect(hash.w).toBe(560);
    expect(publish.w).toBe(160);
    // Siblings by name, side by side from their caller's left edge.
    expect(hash.x).toBe(0);
    expect(publish.x).toBe(560);
    expect(main.y).toBeLessThan(all.y);
    expect(hash.y).toBeLessThan(main.y);
    expect(svg).toContain("hash dist/shared/runtime/hash.js:4 (0.7 ms, 70.00%)");
  });

  it("leaves out frames narrower than the minimum, and colours frames by where they live", () => {
    const svg = flameGraph(foldedStacks(profile), { title: "t", width: 800, minWidthPx: 150 });
    expect(svg).toContain("<title>hash");
    expect(svg).toContain("<title>publish");
    const narrow = flameGraph(foldedStacks(profile), { title: "t", width: 800, minWidthPx: 250 });
    expect(narrow).not.toContain("<title>publish");
    expect(colourOf("hash dist/shared/runtime/hash.js:4")).not.toBe(colourOf("publish @nats-io/nats-core:5"));
    expect(colourOf("(garbage collector) (native/gc):0")).toBe("#c0c0c0");
  });

  it("draws an empty profile as a titled, empty graph", () => {
    const svg = flameGraph(new Map(), { title: "nothing" });
    expect(svg).toContain("nothing");
    expect(svg).not.toContain("<title>");
  });
});

describe("inclusive time", () => {
  it("counts a frame once per stack, with what it called", () => {
    const folded = new Map([
      ["a;b;a", 10],
      ["a;c", 5],
      ["d", 1],
    ]);
    expect(Object.fromEntries(inclusiveTimes(folded, (f) => f !== "d"))).toEqual({ a: 15, b: 10, c: 5 });
  });
});
