import { describe, expect, it } from "vitest";
import { breakerKey } from "../../services/agent/model-breakers.js";
import { serveModel } from "../../shared/bus/model-actor.js";
import type { ModelBreaker } from "../../shared/contracts/model-breaker.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { until } from "../helpers/until.js";
import {
  AGENTCTL,
  payingActorRun,
  runProcess,
  payingPlanner,
  serveCharge,
  settled,
  useClusterSuite,
} from "../helpers/cluster-suite.js";

const RUNS = 12;
/** The outage: past the handed-back runs' first three retries (0.5, 1 and 2 s after their first ask). */
const OUTAGE_MS = 5_000;

const suite = useClusterSuite("model-breaker", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: {
    AGENT_MODEL_OUTAGE_MS: "60000",
    AGENT_RETRY_DELAY_MS: "500",
    AGENT_MODEL_BREAKER_FAILURES: "2",
    AGENT_MODEL_BREAKER_COOLDOWN_MS: "1000",
  },
});

describe("a model provider's outage with the workers' shared breaker", () => {
  it(`${RUNS} runs ask a provider that is down: after the first failures no worker asks it but one try per cooldown; when it is back every run commits`, async () => {
    serveCharge(suite, 0, "pay");
    const planner = payingPlanner("pay", 0, (prompt) => `answered ${prompt}`, 0);
    const upAt = Date.now() + OUTAGE_MS;
    const asked: number[] = [];
    serveModel(
      "shared-provider",
      (request) => {
        asked.push(Date.now());
        if (Date.now() >= upAt) return planner.complete(request);
        return Promise.reject(new AgentError("MODEL_RATE_LIMITED", "provider error (429): slow down"));
      },
      { ...suite.bus, logger: silentLogger },
    );
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      runIds.push(
        (await suite.client.submit(payingActorRun("pay", 0, "shared-provider", `breaker ${i}`))).runId,
      );
    }
    // An operator sees it open, and why.
    const key = breakerKey("actor:shared-provider");
    const breakers = suite.bus.buckets.modelBreakers;
    await until(async () => (await breakers.get(key))?.operation === "PUT", 5_000, {
      what: "the breaker open",
    });
    const agentctl = (...args: string[]) =>
      runProcess(process.execPath, [AGENTCTL, ...args], { env: suite.env() });
    const listed = JSON.parse((await agentctl("breakers", "--json")).stdout) as ModelBreaker[];
    expect(listed.map((b) => [b.provider, b.reason])).toEqual([
      ["actor:shared-provider", "MODEL_RATE_LIMITED: provider error (429): slow down"],
    ]);
    expect((await agentctl("breakers")).stdout).toMatch(
      /^actor:shared-provider {2}open \d+ s(, \d failed tries)?; (next try after \S+|being tried by agent-\d) {2}\(MODEL_RATE_LIMITED: provider error \(429\): slow down\)\n$/,
    );
    const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 45_000)));
    for (const [i, status] of statuses.entries()) {
      expect(status, `${runIds[i]}: ${status.terminal?.reason}`).toMatchObject({
        status: "committed",
        terminal: { output: `answered breaker ${i}` },
      });
    }
    // The provider was asked until a worker had seen two failures (the turns then in flight too),
    // then once per cooldown (1, 2, 4 s…). Without the breaker every run asks at once and again
    // 0.5, 1.5 and 3.5 s later, all within the outage: 4 × 12 = 48 asks.
    const whileDown = asked.filter((at) => at < upAt).length;
    const said = `asks while down: ${whileDown}, in all: ${asked.length}`;
    expect(whileDown, said).toBeGreaterThanOrEqual(2);
    expect(whileDown, said).toBeLessThan(RUNS);
    const logs = await suite.logs();
    expect(logs).toContain("model provider's breaker opened (2 outages in a row)");
    expect(logs).toContain("model provider actor:shared-provider not asked: its breaker has been open");
    expect(logs).toContain("model provider's breaker closed: the provider answered");
    // Waiting out the outage is a warning, not a failed lease.
    expect(logs).toContain("run handed back to wait out an outage");
    expect(logs).not.toMatch(/"code":"MODEL_[A-Z_]+"[^\n]*run lease failed/);
    // Closed: the key holds only its delete marker.
    expect((await breakers.get(key))?.operation).toBe("DEL");
    expect((await agentctl("breakers")).stdout).toBe("no model provider's breaker is open\n");
  }, 90_000);
});
