import { describe, expect, it } from "vitest";
import type { ModelRequest, ModelResponse } from "../../shared/contracts/model.js";
import { serveModel } from "../../shared/bus/model-actor.js";
import { readIterations } from "../../shared/bus/tree-iterations.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import {
  agentctlOf,
  expectChargesInTrail,
  expectFirstReviewsPassed,
  payingActorRun,
  payingPlanner,
  serveCharge,
  settled,
  submitReviewedRuns,
  useClusterSuite,
} from "../helpers/cluster-suite.js";
import { until } from "../helpers/until.js";

const RUNS = 4;
const PAYMENTS = 2;
/**
 * How long the runs wait out an outage before they fail: past the 3.5 s the first case's turns take,
 * and the critic's start in the second, with room for a slow machine; the third case's run fails at
 * its 4th ask (7.5 s).
 */
const OUTAGE_LIMIT_MS = 7_000;
/** How soon a handed-back run is asked again (doubling at each delivery for a model's outage). */
const RETRY_DELAY_MS = 500;
/** The outage the runs wait out: their turns are asked again after 0.5, 1 and 2 s more (3.5 s in all). */
const OUTAGE_MS = 2_000;

const suite = useClusterSuite("model-outage", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: {
    AGENT_MODEL_OUTAGE_MS: String(OUTAGE_LIMIT_MS),
    AGENT_RETRY_DELAY_MS: String(RETRY_DELAY_MS),
    // Shorter than the critic's absence below: its reviews fail as out of reach, and are handed back.
    AGENT_SERVICE_WAIT_MS: "1000",
    // Each run asks on its own schedule here (model-breaker.test.ts has the shared breaker).
    AGENT_MODEL_BREAKER_FAILURES: "0",
  },
});

/**
 * A model actor answering as `complete` does, except while it is down: then every turn gets
 * MODEL_UNAVAILABLE, as a provider's 503 would (its driver's retries spent).
 */
function flakyModel(
  name: string,
  complete: (request: ModelRequest) => Promise<ModelResponse>,
): { down: (ms: number) => void; refused: () => number } {
  let downUntil = 0;
  let refused = 0;
  const answer = (request: ModelRequest): Promise<ModelResponse> => {
    if (Date.now() >= downUntil) return complete(request);
    refused += 1;
    return Promise.reject(new AgentError("MODEL_UNAVAILABLE", "provider error (503): overloaded"));
  };
  serveModel(name, answer, { ...suite.bus, logger: silentLogger });
  return { down: (ms) => (downUntil = Date.now() + ms), refused: () => refused };
}

describe("a model provider's outage", () => {
  it("runs that paid before it wait it out and commit: nothing paid twice, each turn counted once", async () => {
    const { executions } = serveCharge(suite, 100, "pay");
    const planner = payingPlanner("pay", PAYMENTS, (prompt) => `answered ${prompt}`, 50);
    const model = flakyModel("flaky", planner.complete);
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      runIds.push((await suite.client.submit(payingActorRun("pay", PAYMENTS, "flaky", `outage ${i}`))).runId);
    }
    // Every run has paid once: the provider goes down while their next turns are asked.
    await until(() => executions.size >= RUNS, 20_000, { what: "first payments" });
    model.down(OUTAGE_MS);
    const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 30_000)));
    for (const [i, runId] of runIds.entries()) {
      const status = statuses[i];
      expect(status, `${runId}: ${status?.terminal?.reason}`).toMatchObject({
        status: "committed",
        terminal: { output: `answered outage ${i}` },
      });
      // What the run retried is gone from its status once a try went through.
      expect(status?.retrying).toBeUndefined();
      await expectChargesInTrail(suite, runId, "pay", executions);
      // The turns refused were handed back and asked again, and their iterations went back.
      await expect.poll(() => readIterations(suite.bus, runId), { timeout: 5_000 }).toBe(PAYMENTS + 1);
    }
    expect(model.refused()).toBeGreaterThanOrEqual(RUNS);
    expect(executions.size).toBe(RUNS * PAYMENTS);
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
    const logs = await suite.logs();
    expect(logs).toContain("the model turn is asked again later");
  }, 60_000);

  it("a critic out of reach for longer than workers wait for a service: the runs wait for it, and commit on their first review", async () => {
    const runIds = await submitReviewedRuns(suite, 3);
    // No critic runs yet: every review waits 1 s for one, fails, and is handed back.
    await until(() => suite.logs().then((logs) => logs.includes("the review is asked again later")), 15_000, {
      what: "a review handed back",
    });
    await suite.cluster.start("critic", "critic-1");
    // Before, a review that found nobody sent the answer back for repair, and the model, with
    // nothing more to say, failed the run.
    await expectFirstReviewsPassed(suite, runIds);
  }, 60_000);

  it("a run whose provider stays down longer than AGENT_MODEL_OUTAGE_MS fails as modelError, saying for how long", async () => {
    const planner = payingPlanner("pay", 0, () => "never", 0);
    const model = flakyModel("down", planner.complete);
    model.down(60_000);
    const { runId } = await suite.client.submit(payingActorRun("pay", 0, "down", "a long outage"));
    // The run fails: its watch exits 1 (see WATCH_EXIT_CODES), its output read all the same.
    const watched = agentctlOf(suite)
      .run("watch", runId)
      .then(
        () => ({ code: 0, stdout: "" }),
        (err: { code: number; stdout: string }) => err,
      );
    // No breaker names the outage: the status says the run retries it, until when.
    const { retrying } = await suite.waitFor(runId, (s) => s.retrying !== undefined, 20_000);
    expect(retrying).toMatchObject({
      for: "model turn",
      code: "MODEL_UNAVAILABLE",
      reason: "provider error (503): overloaded",
    });
    const [since, nextTry, giveUpAt] = [retrying?.since, retrying?.nextTry, retrying?.giveUpAt].map((t) =>
      Date.parse(t ?? ""),
    );
    expect(giveUpAt! - since!).toBe(OUTAGE_LIMIT_MS);
    expect(nextTry).toBeGreaterThan(since!);
    expect(nextTry).toBeLessThanOrEqual(giveUpAt!);
    const status = await suite.waitFor(runId, settled, 30_000);
    expect(status).toMatchObject({ status: "failed", terminal: { reason: "modelError" } });
    expect(status.retrying).toBeUndefined();
    const { code, stdout } = await watched;
    expect(code).toBe(1);
    expect(stdout).toMatch(
      /retrying: model turn \(MODEL_UNAVAILABLE: provider error \(503\): overloaded\), since \S+, next try after \S+, until \S+/,
    );
    const failed = (await suite.audit(runId)).find((e) => e.kind === "run.failed");
    expect(JSON.stringify(failed)).toMatch(/MODEL_UNAVAILABLE.*tried for \d+(\.\d)? s/);
    const events = await suite.audit(runId);
    const waited = Date.parse(failed?.timestamp ?? "") - Date.parse(events[0]?.timestamp ?? "");
    expect(waited).toBeGreaterThanOrEqual(OUTAGE_LIMIT_MS);
    expect(model.refused()).toBeGreaterThan(1);
  }, 60_000);
});
