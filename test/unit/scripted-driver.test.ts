import { describe, expect, it } from "vitest";
import type { ModelRequest } from "../../shared/contracts/model.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import { InstantClock } from "../../shared/runtime/clock.js";

const request: ModelRequest = {
  system: "You are terse.",
  messages: [{ role: "user", content: "What is 2+2?" }],
  tools: [],
};

describe("scripted driver", () => {
  it("returns the steps in order and fails with SCRIPT_EXHAUSTED past the end", async () => {
    const driver = new ScriptedDriver({
      script: [
        { text: "one" },
        {
          toolCalls: [{ name: "t", input: { a: 1 } }],
          usage: { inputTokens: 3, outputTokens: 4 },
          costUsd: 0.5,
        },
      ],
    });
    expect(await driver.complete(request)).toMatchObject({
      text: "one",
      stopReason: "endTurn",
      toolCalls: [],
    });
    expect(await driver.complete(request)).toMatchObject({
      stopReason: "toolUse",
      toolCalls: [{ id: "call_2_1", name: "t", input: { a: 1 } }],
      usage: { inputTokens: 3, outputTokens: 4 },
      costUsd: 0.5,
    });
    await expect(driver.complete(request)).rejects.toMatchObject({ code: "SCRIPT_EXHAUSTED" });
  });

  it("starts over when loop is set, and can seek for a resumed run", async () => {
    const driver = new ScriptedDriver({ script: [{ text: "a" }, { text: "b" }], loop: true });
    const texts = [];
    for (let i = 0; i < 5; i++) texts.push((await driver.complete(request)).text);
    expect(texts).toEqual(["a", "b", "a", "b", "a"]);
    driver.seek(1);
    expect((await driver.complete(request)).text).toBe("b");
  });

  it("simulates latency with delayMs on the injected clock", async () => {
    const clock = new InstantClock(0);
    const driver = new ScriptedDriver({ script: [{ text: "slow", delayMs: 250 }] }, clock);
    await driver.complete(request);
    expect(clock.now()).toBe(250);
  });
});
