import { describe, expect, it } from "vitest";
import { z } from "zod";
import { InstantClock, ManualClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { fullJitterDelay } from "../../shared/tools/backoff.js";
import { CircuitBreaker } from "../../shared/tools/breaker.js";
import { ToolInvoker } from "../../shared/tools/invoke.js";
import { defineTool } from "../../shared/tools/tool.js";
import { toolCtx } from "../helpers/fixtures.js";

const ctx = toolCtx;

describe("invocation policy", () => {
  /** A tool that fails with these errors in turn (then succeeds). */
  const failing = (...errors: (() => Error)[]) => {
    let calls = 0;
    const tool = defineTool({
      name: "pay",
      description: "a side effect",
      input: z.object({}),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      idempotent: false,
      execute: () => {
        const error = errors[calls++];
        return error ? Promise.reject(error()) : Promise.resolve({ output: calls });
      },
    });
    return { tool, calls: () => calls };
  };

  /** A tool that fails `failures` times with `error`, then succeeds. */
  const flaky = (failures: number, error: () => Error) =>
    failing(...Array.from({ length: failures }, () => error));
  /** An invoker on an instant clock, its jitter seeded. */
  const instant = (policy?: ConstructorParameters<typeof ToolInvoker>[0]["policy"]) =>
    new ToolInvoker({ clock: new InstantClock(0), random: seededRandom(1), ...(policy ? { policy } : {}) });

  it("retries retryable errors with backoff and then succeeds", async () => {
    const clock = new InstantClock(0);
    const { tool, calls } = flaky(2, () => new AgentError("TOOL_UNAVAILABLE", "down"));
    const invoker = new ToolInvoker({
      clock,
      random: seededRandom(7),
      policy: { retries: 3, baseDelayMs: 100, maxDelayMs: 1000 },
    });
    const result = await invoker.invoke(tool, {}, ctx({ kind: "compute" }));
    expect(result.output).toBe(3);
    expect(calls()).toBe(3);
    expect(clock.now()).toBeGreaterThan(0);
    expect(clock.now()).toBeLessThan(100 + 200);
  });

  it("never retries an error typed terminal", async () => {
    const { tool, calls } = flaky(5, () => new AgentError("TOOL_FAILED", "bad"));
    const invoker = instant({ retries: 5 });
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_FAILED",
    });
    expect(calls()).toBe(1);
  });

  it("gives up after the configured retries", async () => {
    const { tool, calls } = flaky(10, () => new AgentError("TOOL_TIMEOUT", "slow"));
    const invoker = instant({ retries: 2 });
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_TIMEOUT",
    });
    expect(calls()).toBe(3);
  });

  it("an attempt whose outcome is unknown stays unknown when the later ones learn nothing (nobody serving, the breaker open): the caller reconciles", async () => {
    const { tool, calls } = failing(
      () => new AgentError("TOOL_TIMEOUT", "the connection dropped while waiting for a reply"),
      () => new AgentError("TOOL_UNAVAILABLE", "nobody is serving 'pay'"),
      () => new AgentError("TOOL_UNAVAILABLE", "nobody is serving 'pay'"),
    );
    const invoker = instant({ retries: 2 });
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_TIMEOUT",
      cause: { code: "TOOL_UNAVAILABLE" },
    });
    expect(calls()).toBe(3);

    const breaking = failing(
      () => new AgentError("TOOL_IN_PROGRESS", "a call with this idempotency key is still running"),
      () => new AgentError("TOOL_UNAVAILABLE", "nobody is serving 'pay'"),
    );
    const tripped = instant({ retries: 3, breaker: { failureThreshold: 2, cooldownMs: 60_000 } });
    await expect(tripped.invoke(breaking.tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_IN_PROGRESS",
      cause: { code: "CIRCUIT_OPEN" },
    });
    expect(breaking.calls()).toBe(2);
  });

  it("an answer from the service after an unknown attempt is the outcome", async () => {
    const { tool } = failing(
      () => new AgentError("TOOL_TIMEOUT", "no reply in time"),
      () => new AgentError("TOOL_FAILED", "card declined"),
    );
    const invoker = instant({ retries: 2 });
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_FAILED",
    });
  });

  const unavailable = () => new AgentError("TOOL_UNAVAILABLE", "nobody is serving 'pay'");

  it("a call that finds nobody serving its tool waits for a service, spending neither its retries nor its breaker", async () => {
    // Eight asks find no service (more than the breaker's threshold), the ninth reaches it.
    const { tool, calls } = flaky(8, unavailable);
    const clock = new InstantClock(0);
    const waits: string[] = [];
    const invoker = new ToolInvoker({
      clock,
      random: seededRandom(5),
      policy: { retries: 0, serviceWaitMs: 10_000, breaker: { failureThreshold: 3, cooldownMs: 30_000 } },
      onServiceWait: (name, call) => waits.push(`${name} ${call.idempotencyKey}`),
    });
    expect(
      (await invoker.invoke(tool, {}, ctx({ kind: "compute" }, { idempotencyKey: "k-wait" }))).output,
    ).toBe(9);
    expect(calls()).toBe(9);
    // Told once, when the call began to wait.
    expect(waits).toEqual(["pay k-wait"]);
    // Asked again within a second at most, well inside the wait.
    expect(clock.now()).toBeLessThan(8 * 1_000);
    expect(invoker.breakerFor("pay").current(clock.now())).toBe("closed");
  });

  it("a call gives up on its service once serviceWaitMs has passed, then makes its usual retries", async () => {
    const { tool, calls } = flaky(1_000, unavailable);
    const clock = new InstantClock(0);
    const invoker = new ToolInvoker({
      clock,
      random: seededRandom(5),
      policy: { retries: 2, baseDelayMs: 100, maxDelayMs: 100, serviceWaitMs: 3_000 },
    });
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_UNAVAILABLE",
    });
    expect(clock.now()).toBeGreaterThanOrEqual(3_000);
    expect(clock.now()).toBeLessThan(3_000 + 2 * 100);
    expect(calls()).toBeGreaterThan(3);
    // Without a wait, the same call gives up after its retries.
    const { tool: once, calls: onceCalls } = flaky(1_000, unavailable);
    await expect(instant({ retries: 2 }).invoke(once, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_UNAVAILABLE",
    });
    expect(onceCalls()).toBe(3);
  });

  it("a half-open breaker's trial that found nobody serving may ask again", async () => {
    const { tool } = failing(() => new AgentError("TOOL_FAILED", "broken"), unavailable, unavailable);
    const clock = new InstantClock(0);
    const invoker = new ToolInvoker({
      clock,
      random: seededRandom(5),
      policy: { retries: 0, serviceWaitMs: 5_000, breaker: { failureThreshold: 1, cooldownMs: 100 } },
    });
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_FAILED",
    });
    await clock.sleep(100);
    expect(invoker.breakerFor("pay").current(clock.now())).toBe("halfOpen");
    expect((await invoker.invoke(tool, {}, ctx({ kind: "compute" }))).output).toBe(4);
    expect(invoker.breakerFor("pay").current(clock.now())).toBe("closed");
  });

  it("invalid input is refused before the tool runs", async () => {
    const invoker = instant();
    await expect(invoker.invoke(echoTool, { text: 42 }, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "INVALID_INPUT",
    });
  });

  it("aborting the caller's signal aborts the running tool and stops retries", async () => {
    let seen: AbortSignal | undefined;
    let calls = 0;
    const hang = defineTool({
      name: "hang",
      description: "waits for abort",
      input: z.object({}),
      capability: { kind: "compute" },
      execute: (_i, c) => {
        calls++;
        seen = c.signal;
        return new Promise<never>((_, reject) =>
          c.signal.addEventListener("abort", () => reject(new AgentError("TOOL_UNAVAILABLE", "cancelled"))),
        );
      },
    });
    const invoker = new ToolInvoker({
      clock: new ManualClock(0),
      random: seededRandom(1),
      policy: { retries: 5 },
    });
    const outer = new AbortController();
    const pending = invoker.invoke(hang, {}, ctx({ kind: "compute" }, { signal: outer.signal }));
    await Promise.resolve();
    outer.abort(new Error("caller gone"));
    await expect(pending).rejects.toMatchObject({ code: "TOOL_UNAVAILABLE" });
    expect(seen?.aborted).toBe(true);
    expect((seen?.reason as Error).message).toBe("caller gone");
    expect(calls).toBe(1);
  });

  it("a timeout says which tool and after how long; invalid input carries the zod issues", async () => {
    const clock = new ManualClock(0);
    const slow = defineTool({
      name: "slow",
      description: "s",
      input: z.object({}),
      capability: { kind: "compute" },
      timeoutMs: 50,
      execute: () => new Promise<never>(() => undefined),
    });
    const invoker = new ToolInvoker({ clock, random: seededRandom(1), policy: { retries: 0 } });
    const pending = invoker.invoke(slow, {}, ctx({ kind: "compute" }));
    await clock.advance(50);
    await expect(pending).rejects.toThrow("tool 'slow' timed out after 50 ms");
    const invalid = (await invoker.invoke(echoTool, {}, ctx({ kind: "compute" })).then(
      () => undefined,
      (e: unknown) => e,
    )) as AgentError;
    expect(invalid.message).toMatch(/^invalid input for tool 'echo': /);
    expect(invalid.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: ["text"] })]));
    const { tool } = flaky(1, () => new Error("plain failure"));
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_FAILED",
      message: "plain failure",
    });
  });

  it("a success in between resets the invoker's breaker count", async () => {
    let n = 0;
    const outcomes = [false, true, false, false];
    const tool = defineTool({
      name: "alt",
      description: "a",
      input: z.object({}),
      capability: { kind: "compute" },
      execute: () =>
        outcomes[n++] ? Promise.resolve({ output: n }) : Promise.reject(new AgentError("TOOL_FAILED", "x")),
    });
    const invoker = instant({ retries: 0, breaker: { failureThreshold: 2, cooldownMs: 1000 } });
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toThrow();
    await invoker.invoke(tool, {}, ctx({ kind: "compute" }));
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_FAILED",
    });
    expect(invoker.breakerFor("alt").current(0)).toBe("closed");
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_FAILED",
    });
    expect(invoker.breakerFor("alt").current(0)).toBe("open");
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toThrow(
      "tool 'alt' is failing; its circuit breaker is open",
    );
  });

  it("refusals of the call (a path or host outside the grant, a bad input) leave the breaker closed; the tool's own failures open it", async () => {
    const refusals = [
      "CAPABILITY_DENIED",
      "HOST_NOT_ALLOWED",
      "INVALID_INPUT",
      "PRIVACY_DENIED",
      "PATH_NOT_ALLOWED",
      "COMMAND_NOT_ALLOWED",
    ] as const;
    const { tool } = failing(...refusals.map((code) => () => new AgentError(code, "refused")));
    const invoker = instant({ retries: 0, breaker: { failureThreshold: 2, cooldownMs: 1000 } });
    for (const code of refusals)
      await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({ code });
    expect(invoker.breakerFor("pay").current(0)).toBe("closed");
    const broken = failing(
      () => new AgentError("TOOL_FAILED", "x"),
      () => new AgentError("TOOL_FAILED", "x"),
    );
    for (let i = 0; i < 2; i++)
      await expect(invoker.invoke(broken.tool, {}, ctx({ kind: "compute" }))).rejects.toThrow();
    expect(invoker.breakerFor("pay").current(0)).toBe("open");
  });

  it("full jitter stays within [0, min(max, base·2^attempt))", () => {
    const random = seededRandom(3);
    for (let attempt = 0; attempt < 10; attempt++) {
      const ceiling = Math.min(1000, 50 * 2 ** attempt);
      for (let i = 0; i < 50; i++) {
        const d = fullJitterDelay(attempt, { baseDelayMs: 50, maxDelayMs: 1000 }, random);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThan(ceiling);
      }
    }
    expect(fullJitterDelay(3, { baseDelayMs: 100, maxDelayMs: 10_000 }, { next: () => 0.5 })).toBe(400);
  });

  it("the breaker opens after N failures, half-opens after the cooldown, and closes on success", () => {
    const breaker = new CircuitBreaker({ failureThreshold: 3, cooldownMs: 1000 });
    for (let i = 0; i < 3; i++) {
      expect(breaker.tryAcquire(0)).toBe(true);
      breaker.onFailure(0);
    }
    expect(breaker.current(0)).toBe("open");
    expect(breaker.tryAcquire(999)).toBe(false);
    expect(breaker.current(1000)).toBe("halfOpen");
    expect(breaker.tryAcquire(1000)).toBe(true);
    expect(breaker.tryAcquire(1000)).toBe(false); // one trial at a time
    breaker.onSuccess();
    expect(breaker.current(1000)).toBe("closed");
  });

  it("a failed half-open trial re-opens the breaker; a success resets the failure count", () => {
    const breaker = new CircuitBreaker({ failureThreshold: 2, cooldownMs: 100 });
    breaker.onFailure(0);
    breaker.onSuccess();
    breaker.onFailure(0);
    expect(breaker.current(0)).toBe("closed");
    breaker.onFailure(0);
    expect(breaker.current(0)).toBe("open");
    expect(breaker.tryAcquire(100)).toBe(true);
    breaker.onFailure(100);
    expect(breaker.current(150)).toBe("open");
    expect(breaker.current(200)).toBe("halfOpen");
  });

  it("the invoker refuses calls while a tool's breaker is open", async () => {
    const { tool, calls } = flaky(100, () => new AgentError("TOOL_FAILED", "x"));
    const invoker = instant({ retries: 0, breaker: { failureThreshold: 2, cooldownMs: 10_000 } });
    for (let i = 0; i < 2; i++)
      await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
        code: "TOOL_FAILED",
      });
    await expect(invoker.invoke(tool, {}, ctx({ kind: "compute" }))).rejects.toMatchObject({
      code: "CIRCUIT_OPEN",
    });
    expect(calls()).toBe(2);
  });
});
