import { describe, expect, it } from "vitest";
import type { ModelRequest, ModelResponse } from "../../shared/contracts/model.js";
import { connectBus } from "../../shared/bus/connect.js";
import { Kvm } from "@nats-io/kv";
import type { ModelDriver } from "../../shared/models/driver.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { AgentError, isAgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { breakerKey, ModelBreakers } from "../../shared/bus/model-breakers.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { until } from "../helpers/until.js";

/** Model breakers shared by workers through their bucket, on a real server. */
const suite = useBusSuite("mb");

const COOLDOWN_MS = 10_000;
const REQUEST: ModelRequest = { system: "s", messages: [{ role: "user", content: "hi" }], tools: [] };
const RESPONSE: ModelResponse = {
  text: "ok",
  toolCalls: [],
  stopReason: "endTurn",
  usage: { inputTokens: 1, outputTokens: 1 },
  costUsd: 0,
  model: "m",
};

/** A provider that answers, or fails every call as an outage while `down`; it counts the calls it got. */
function provider(name: string): ModelDriver & { provider: string; down: boolean; calls: number } {
  const driver = {
    id: `openai:${name}`,
    locality: "remote" as const,
    provider: `openai:${name}@https://example.invalid/v1`,
    down: false,
    calls: 0,
    complete: (): Promise<ModelResponse> => {
      driver.calls += 1;
      if (driver.down) return Promise.reject(new AgentError("MODEL_RATE_LIMITED", "429: slow down"));
      return Promise.resolve(RESPONSE);
    },
  };
  return driver;
}

function worker(workerId: string, clock: ManualClock): { breakers: ModelBreakers; metrics: ActorMetrics } {
  const metrics = new ActorMetrics("agent");
  const breakers = new ModelBreakers(
    suite.buckets.modelBreakers,
    { failures: 3, cooldownMs: COOLDOWN_MS },
    { clock, logger: silentLogger, workerId, metrics },
  );
  return { breakers, metrics };
}

/** Workers w1 and w2 on the bucket, their watches started; stopped when the test's scope ends. */
async function startedPair(clock: ManualClock) {
  const [a, b] = [worker("w1", clock), worker("w2", clock)];
  await Promise.all([a.breakers.start(), b.breakers.start()]);
  return {
    a,
    b,
    [Symbol.dispose]: () => {
      a.breakers.stop();
      b.breakers.stop();
    },
  };
}

async function outcome(driver: ModelDriver): Promise<string> {
  return driver.complete(REQUEST).then(
    (r) => r.text,
    (err: unknown) => (isAgentError(err) ? err.code : String(err)),
  );
}

async function counter(metrics: ActorMetrics, name: string): Promise<number> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  return metric?.values.reduce((sum, v) => sum + v.value, 0) ?? 0;
}

describe("model providers' breakers shared by the workers", () => {
  it("outages in a row open a provider's breaker for every worker; after the cooldown one call tries it, and its answer closes it", async () => {
    const clock = new ManualClock(Date.now());
    using pair = await startedPair(clock);
    const { a, b } = pair;
    const model = provider("gpt-a");
    const [viaA, viaB] = [a.breakers.guard(model), b.breakers.guard(model)];
    model.down = true;
    // Two outages through w1 and two through w2: neither has seen three in a row.
    for (const via of [viaA, viaA, viaB, viaB]) expect(await outcome(via)).toBe("MODEL_RATE_LIMITED");
    expect(a.breakers.breakerOf(model.provider)).toBeUndefined();
    expect(await outcome(viaA)).toBe("MODEL_RATE_LIMITED");
    expect(a.breakers.breakerOf(model.provider)).toMatchObject({ state: "open", by: "w1" });
    // w2 learns it from its watch, and its runs' calls no longer reach the provider.
    await until(() => b.breakers.breakerOf(model.provider) !== undefined, 5_000, { what: "w2 sees it" });
    const calls = model.calls;
    const refused = await viaB.complete(REQUEST).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: "MODEL_UNAVAILABLE", details: { breaker: { state: "open" } } });
    expect(String((refused as Error).message)).toMatch(
      /breaker has been open for 0 s \(MODEL_RATE_LIMITED: 429/,
    );
    expect(await outcome(viaA)).toBe("MODEL_UNAVAILABLE");
    expect(model.calls).toBe(calls);
    expect(await counter(a.metrics, "agents_model_breakers_opened_total")).toBe(1);
    expect(await counter(b.metrics, "agents_model_calls_refused_total")).toBe(1);
    // Its cooldown over, both workers' calls come at once: one of them tries the provider.
    await clock.advance(COOLDOWN_MS);
    expect((await Promise.all([outcome(viaA), outcome(viaB)])).sort()).toEqual([
      "MODEL_RATE_LIMITED",
      "MODEL_UNAVAILABLE",
    ]);
    expect(model.calls).toBe(calls + 1);
    // The try failed: open again, for twice as long.
    const again = a.breakers.breakerOf(model.provider) ?? b.breakers.breakerOf(model.provider);
    expect(again).toMatchObject({ state: "open", failedProbes: 1, cooldownMs: 2 * COOLDOWN_MS });
    await until(
      () =>
        a.breakers.breakerOf(model.provider)?.failedProbes === 1 &&
        b.breakers.breakerOf(model.provider)?.failedProbes === 1,
      5_000,
      { what: "both see the failed probe" },
    );
    await clock.advance(COOLDOWN_MS);
    expect(await outcome(viaB)).toBe("MODEL_UNAVAILABLE");
    model.down = false;
    await clock.advance(COOLDOWN_MS);
    expect(await outcome(viaB)).toBe("ok");
    expect(b.breakers.breakerOf(model.provider)).toBeUndefined();
    await until(() => a.breakers.breakerOf(model.provider) === undefined, 5_000, {
      what: "w1 sees it closed",
    });
    expect(await outcome(viaA)).toBe("ok");
    expect(model.calls).toBe(calls + 3);
    // Closed is no key at all: the bucket keeps the delete marker only.
    const entry = await suite.buckets.modelBreakers.get(breakerKey(model.provider));
    expect(entry?.operation).toBe("DEL");
    // Another provider was never affected; an answer that is not an outage resets the count.
    const other = provider("gpt-b");
    const viaOther = a.breakers.guard(other);
    other.down = true;
    expect(await outcome(viaOther)).toBe("MODEL_RATE_LIMITED");
    expect(await outcome(viaOther)).toBe("MODEL_RATE_LIMITED");
    other.down = false;
    expect(await outcome(viaOther)).toBe("ok");
    other.down = true;
    expect(await outcome(viaOther)).toBe("MODEL_RATE_LIMITED");
    expect(await outcome(viaOther)).toBe("MODEL_RATE_LIMITED");
    expect(a.breakers.breakerOf(other.provider)).toBeUndefined();
  });

  it("a breaker another worker's try closed starts each worker's count afresh: outages counted while it was open do not reopen it at the next one", async () => {
    const clock = new ManualClock(Date.now());
    using pair = await startedPair(clock);
    const { a, b } = pair;
    const model = provider("gpt-e");
    const [viaA, viaB] = [a.breakers.guard(model), b.breakers.guard(model)];
    model.down = true;
    const failures = [];
    for (let i = 0; i < 3; i++) failures.push(await viaA.complete(REQUEST).catch((err: unknown) => err));
    const open = a.breakers.breakerOf(model.provider);
    expect(open).toMatchObject({ state: "open", by: "w1" });
    // The outage that opened it says when the provider is next tried; the ones before, nothing.
    expect(failures.map((f) => (f as AgentError).code)).toEqual(Array(3).fill("MODEL_RATE_LIMITED"));
    expect(failures.map((f) => (f as AgentError).details)).toEqual([undefined, undefined, { breaker: open }]);
    // Two of w1's calls sent before it opened come back as outages while it is open.
    const late = new AgentError("MODEL_UNAVAILABLE", "503").toBody();
    for (let i = 0; i < 2; i++) await a.breakers.settle(model.provider, late, { probe: false, sentAt: 0 });
    await until(() => b.breakers.breakerOf(model.provider) !== undefined, 5_000, { what: "w2 sees it" });
    model.down = false;
    await clock.advance(COOLDOWN_MS);
    expect(await outcome(viaB)).toBe("ok");
    await until(() => a.breakers.breakerOf(model.provider) === undefined, 5_000, {
      what: "w1 sees it closed",
    });
    // One outage through w1: one in a row, not three.
    model.down = true;
    expect(await outcome(viaA)).toBe("MODEL_RATE_LIMITED");
    expect(a.breakers.breakerOf(model.provider)).toBeUndefined();
    expect(await counter(a.metrics, "agents_model_breakers_opened_total")).toBe(1);
  });

  it("a worker that starts later sees a breaker already open; a bucket out of reach lets calls go", async () => {
    const clock = new ManualClock(Date.now());
    const a = worker("w1", clock);
    await a.breakers.start();
    const model = provider("gpt-c");
    model.down = true;
    const viaA = a.breakers.guard(model);
    for (let i = 0; i < 3; i += 1) await outcome(viaA);
    a.breakers.stop();
    // A worker of its own connection, which then loses it.
    const nc = await connectBus({
      servers: suite.server.url,
      name: "mb-late",
      logger: silentLogger,
      ...(suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {}),
    });
    const late = new ModelBreakers(
      await new Kvm(nc).open(suite.subjects.buckets().modelBreakers),
      { failures: 3, cooldownMs: COOLDOWN_MS },
      { clock, logger: silentLogger, workerId: "w3" },
    );
    await late.start();
    await until(() => late.breakerOf(model.provider) !== undefined, 5_000, {
      what: "the late worker sees it",
    });
    const viaLate = late.guard(model);
    expect(await outcome(viaLate)).toBe("MODEL_UNAVAILABLE");
    await nc.close();
    await clock.advance(COOLDOWN_MS);
    const calls = model.calls;
    model.down = false;
    // Its claim to try the provider cannot be written, nor the key read: the call goes ahead.
    expect(await outcome(viaLate)).toBe("ok");
    expect(model.calls).toBe(calls + 1);
    late.stop();
  });

  it("a model with no provider (the scripted one) and a breaker turned off are left as they are", () => {
    const clock = new ManualClock(0);
    const off = new ModelBreakers(
      suite.buckets.modelBreakers,
      { failures: 0, cooldownMs: COOLDOWN_MS },
      { clock, logger: silentLogger, workerId: "w" },
    );
    const model = provider("gpt-d");
    expect(off.guard(model)).toBe(model);
    const { breakers } = worker("w", clock);
    const scripted: ModelDriver = {
      id: "scripted",
      locality: "local",
      complete: () => Promise.resolve(RESPONSE),
    };
    expect(breakers.guard(scripted)).toBe(scripted);
  });
});
