import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { grantOf } from "../../shared/bus/tree-iterations.js";

describe("a reservation's grant from its tree's counter", () => {
  it("grants what fits under the cap on top of what was counted before the add", () => {
    // cap, the counter's total after adding `asked`, asked
    expect(grantOf(50, 5, 5)).toBe(5);
    expect(grantOf(50, 50, 4)).toBe(4);
    expect(grantOf(50, 52, 4)).toBe(2);
    expect(grantOf(50, 54, 4)).toBe(0);
    // Others' overshoots not yet given back count as used: nothing past the cap, ever.
    expect(grantOf(50, 90, 4)).toBe(0);
    // A counter below zero (a give-back to a purged counter) grants no more than asked.
    expect(grantOf(50, 1, 4)).toBe(4);
  });

  it("never grants more than asked, nor past the cap, and grants all that fits", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: -100, max: 20_000 }),
        fc.integer({ min: 1, max: 1_000 }),
        (cap, before, asked) => {
          const granted = grantOf(cap, before + asked, asked);
          expect(granted).toBeGreaterThanOrEqual(0);
          expect(granted).toBeLessThanOrEqual(asked);
          if (before >= 0 && granted > 0) expect(before + granted).toBeLessThanOrEqual(cap);
          expect(granted).toBe(Math.max(0, Math.min(asked, cap - before)));
        },
      ),
    );
  });
});
