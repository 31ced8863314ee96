import { describe, expect, it } from "vitest";
import { ManualClock } from "../../shared/runtime/clock.js";
import { Recurring } from "../../shared/runtime/recurring.js";

describe("a recurring condition", () => {
  it("is said the first time, then once per interval with how often it happened meanwhile; its end says all of it", async () => {
    const clock = new ManualClock(1_000);
    const recurring = new Recurring(clock, 30_000);
    expect(recurring.over()).toBeUndefined();
    expect(recurring.again()).toEqual({ times: 1, forMs: 0 });
    await clock.advance(10_000);
    expect(recurring.again()).toBeUndefined();
    await clock.advance(10_000);
    expect(recurring.again()).toBeUndefined();
    await clock.advance(10_000);
    expect(recurring.again()).toEqual({ times: 3, forMs: 30_000 });
    await clock.advance(5_000);
    expect(recurring.again()).toBeUndefined();
    expect(recurring.over()).toEqual({ times: 5, forMs: 35_000 });
    expect(recurring.over()).toBeUndefined();
    // A new run of it is said at once, counted from its own start.
    await clock.advance(1_000);
    expect(recurring.again()).toEqual({ times: 1, forMs: 0 });
  });
});
