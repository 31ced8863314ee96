import { describe, expect, it } from "vitest";
import { AgentEnv } from "../../services/agent/env.js";
import { CHILDREN_END_WAIT_MS } from "../../services/agent/children-end.js";
import { CANCEL_SETTLE_WAIT_MS } from "../../services/agent/settle-call.js";

const BASE = { NATS_URL: "nats://127.0.0.1:4222" };

describe("an agent worker's settings for a cancel's waits", () => {
  it("default to the waits the README states (10 and 5 minutes), the constants the worker falls back on", () => {
    const env = AgentEnv.parse(BASE);
    expect(env.AGENT_CHILDREN_END_WAIT_MS).toBe(600_000);
    expect(env.AGENT_CANCEL_SETTLE_WAIT_MS).toBe(300_000);
    expect([CHILDREN_END_WAIT_MS, CANCEL_SETTLE_WAIT_MS]).toEqual([600_000, 300_000]);
  });

  it("take milliseconds from the environment, 0 included, and refuse what is not a whole, non-negative number within a day", () => {
    const env = AgentEnv.parse({
      ...BASE,
      AGENT_CHILDREN_END_WAIT_MS: "0",
      AGENT_CANCEL_SETTLE_WAIT_MS: "90000",
    });
    expect([env.AGENT_CHILDREN_END_WAIT_MS, env.AGENT_CANCEL_SETTLE_WAIT_MS]).toEqual([0, 90_000]);
    for (const bad of ["-1", "1.5", "soon", String(86_400_001)]) {
      const parsed = AgentEnv.safeParse({ ...BASE, AGENT_CANCEL_SETTLE_WAIT_MS: bad });
      expect(parsed.success, bad).toBe(false);
      expect(parsed.error?.issues[0]?.path).toEqual(["AGENT_CANCEL_SETTLE_WAIT_MS"]);
    }
    expect(AgentEnv.safeParse({ ...BASE, AGENT_CHILDREN_END_WAIT_MS: "-5" }).success).toBe(false);
  });
});
