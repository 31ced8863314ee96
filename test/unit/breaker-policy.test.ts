import { describe, expect, it } from "vitest";
import { AgentEnv } from "../../services/agent/env.js";
import { parseEnv } from "../../shared/runtime/config.js";
import {
  admission,
  MAX_BREAKER_COOLDOWN_MS,
  opened,
  probing,
  refusal,
  reopened,
  withOpenBreaker,
} from "../../shared/models/breaker-policy.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { retryDelay } from "../../services/agent/lease-failure.js";
import { modelFailure } from "../../services/agent/model-outage.js";

const SETTINGS = { failures: 3, cooldownMs: 10_000 };
const OUTAGE = { code: "MODEL_RATE_LIMITED" as const, message: "429 too many requests", retryable: true };

describe("a model provider's breaker (the decisions)", () => {
  it("closed lets calls go; open refuses them until its cooldown has passed, then one call tries", () => {
    expect(admission(undefined, 5)).toEqual({ go: "call" });
    const open = opened("openai:gpt@https://api", OUTAGE, SETTINGS, 1_000, "w1");
    expect(open).toMatchObject({ state: "open", until: 11_000, openedAt: 1_000, failedProbes: 0, by: "w1" });
    expect(open.reason).toBe("MODEL_RATE_LIMITED: 429 too many requests");
    expect(admission(open, 10_999)).toEqual({ go: "refuse", breaker: open });
    expect(admission(open, 11_000)).toEqual({ go: "probe" });
    // While a call tries it, others wait, for one cooldown at most (its worker may have died).
    const trying = probing(open, 11_000, "w2");
    expect(trying).toMatchObject({ state: "probing", until: 21_000, by: "w2", openedAt: 1_000 });
    expect(admission(trying, 20_999).go).toBe("refuse");
    expect(admission(trying, 21_000).go).toBe("probe");
  });

  it("each failed probe doubles the wait, up to a minute, or the configured cooldown when longer", () => {
    let breaker = opened("p", OUTAGE, SETTINGS, 0, "w1");
    const waits: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      breaker = reopened(breaker, OUTAGE, SETTINGS, 100_000 * i, "w1");
      waits.push(breaker.cooldownMs);
      expect(breaker.until).toBe(100_000 * i + breaker.cooldownMs);
    }
    expect(waits).toEqual([
      20_000,
      40_000,
      MAX_BREAKER_COOLDOWN_MS,
      MAX_BREAKER_COOLDOWN_MS,
      MAX_BREAKER_COOLDOWN_MS,
    ]);
    expect(breaker).toMatchObject({ failedProbes: 5, openedAt: 0, state: "open" });
    const long = { failures: 1, cooldownMs: 120_000 };
    expect(reopened(opened("p", OUTAGE, long, 0, "w"), OUTAGE, long, 0, "w").cooldownMs).toBe(120_000);
  });

  it("a refused call fails as the provider's outage would, saying why and until when", () => {
    const open = opened("actor:flaky", OUTAGE, SETTINGS, Date.UTC(2026, 0, 1), "w1");
    const error = refusal(open, Date.UTC(2026, 0, 1) + 4_000);
    expect(error.code).toBe("MODEL_UNAVAILABLE");
    expect(error.retryable).toBe(true);
    expect(error.message).toBe(
      "model provider actor:flaky not asked: its breaker has been open for 4 s (MODEL_RATE_LIMITED: 429 too many requests); next try after 2026-01-01T00:00:10.000Z",
    );
    expect(error.details).toEqual({ breaker: open });
    expect(refusal(probing(open, 0, "w2"), 0).message).toMatch(/another worker is trying it$/);
  });

  it("a breaker open longer than runs wait out an outage is refused at start, naming both settings", () => {
    expect(parseEnv(AgentEnv, {})).toMatchObject({
      AGENT_MODEL_BREAKER_FAILURES: 5,
      AGENT_MODEL_BREAKER_COOLDOWN_MS: 30_000,
      AGENT_MODEL_OUTAGE_MS: 300_000,
    });
    expect(() => parseEnv(AgentEnv, { AGENT_MODEL_OUTAGE_MS: "20000" })).toThrow(
      /AGENT_MODEL_BREAKER_COOLDOWN_MS: AGENT_MODEL_BREAKER_COOLDOWN_MS must be shorter than AGENT_MODEL_OUTAGE_MS/,
    );
    expect(
      parseEnv(AgentEnv, { AGENT_MODEL_OUTAGE_MS: "20000", AGENT_MODEL_BREAKER_FAILURES: "0" }),
    ).toBeTruthy();
    expect(parseEnv(AgentEnv, { AGENT_MODEL_OUTAGE_MS: "0" })).toBeTruthy();
    expect(
      parseEnv(AgentEnv, { AGENT_MODEL_OUTAGE_MS: "20000", AGENT_MODEL_BREAKER_COOLDOWN_MS: "5000" }),
    ).toBeTruthy();
  });

  it("an outage that leaves the breaker open says so: its run comes back when the breaker next lets a call try, however many times it was refused before", () => {
    const breaker = reopened(opened("p", OUTAGE, SETTINGS, 0, "w1"), OUTAGE, SETTINGS, 50_000, "w2");
    const failed = new AgentError("MODEL_UNAVAILABLE", "503 overloaded", { details: { status: 503 } });
    const told = withOpenBreaker(failed, breaker, 50_000) as AgentError;
    expect(told).toMatchObject({ code: "MODEL_UNAVAILABLE", message: "503 overloaded", cause: failed });
    expect(told.details).toEqual({ status: 503, breaker });
    // The run handed back by the failed review (its job's 8th delivery after seven refusals).
    const state = { guard: { iteration: 1, startedAt: 0 }, limits: {} } as Parameters<typeof modelFailure>[1];
    const event = { type: "criticFailed" as const, at: 50_000, error: told.toBody() };
    const outcome = modelFailure(event, state, 40_000, 300_000, 50_000);
    if (!("handBack" in outcome)) throw new Error("not handed back");
    expect(retryDelay(outcome.handBack, 8, 500, 50_000)).toBe(breaker.until - 50_000);
    expect(retryDelay(failed, 8, 500, 50_000)).toBe(60_000);
    // A run whose deadline comes before that try comes back at its deadline, and fails then.
    const hurried = { ...state, limits: { deadlineMs: 52_000 } } as Parameters<typeof modelFailure>[1];
    const soon = modelFailure(event, hurried, 40_000, 300_000, 50_000);
    if (!("handBack" in soon)) throw new Error("not handed back");
    expect(breaker.until - 50_000).toBeGreaterThan(2_000);
    expect(retryDelay(soon.handBack, 8, 500, 50_000)).toBe(2_000);
    // Not an outage, no breaker, or one whose wait is over: the error as it came.
    const rejected = new AgentError("MODEL_REJECTED", "400");
    expect(withOpenBreaker(rejected, breaker, 50_000)).toBe(rejected);
    expect(withOpenBreaker(failed, undefined, 50_000)).toBe(failed);
    expect(withOpenBreaker(failed, breaker, breaker.until)).toBe(failed);
  });
});
