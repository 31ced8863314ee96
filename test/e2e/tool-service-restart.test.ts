import { describe, expect, it } from "vitest";
import { systemClock } from "../../shared/runtime/clock.js";
import { chargeTool, expectChargesInTrail, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

const RUNS = 6;
const PAYMENTS = 6;
const PAYMENT_MS = 200;
/** Longer than a call's retries take (about 0.6 s), shorter than AGENT_TOOL_SERVICE_WAIT_MS (10 s). */
const GAP_MS = 3_000;

/** Tool services restarting under runs that call them, on the workers' default wait for a service. */
const suite = useClusterSuite("tool-restart", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
});

/** A run that pays `payments` times through `tool`, then answers. */
function payingRun(tool: string, payments: number, answer: string) {
  const calls = Array.from({ length: payments }, (_, i) => ({
    toolCalls: [{ name: tool, input: { amount: i + 1 } }],
  }));
  return spec({ script: [...calls, { text: answer }], tools: [tool] });
}

/** What the model was told about the run's tool calls: none may have failed. */
async function expectNoToolFailed(runId: string): Promise<void> {
  const events = await suite.audit(runId);
  expect(
    events.filter((e) => e.kind === "tool.aborted" || e.kind === "tool.denied"),
    runId,
  ).toEqual([]);
}

describe("a tool service that restarts, or starts after the runs naming it", () => {
  it(`stopped for ${GAP_MS} ms while runs pay (a rolling restart): the calls made meanwhile wait for it; every payment happens once, none fails`, async () => {
    const { tool, executions } = chargeTool(PAYMENT_MS, "pay");
    let service = suite.serveTool(tool);
    const runIds: string[] = [];
    for (let run = 0; run < RUNS; run += 1)
      runIds.push((await suite.client.submit(payingRun("pay", PAYMENTS, `paid run ${run}`))).runId);
    await systemClock.sleep(3 * PAYMENT_MS);
    // Stops taking calls; the ones it holds finish and answer, as a draining service does.
    service.stop();
    const stoppedWith = executions.size;
    expect(stoppedWith).toBeGreaterThan(0);
    await systemClock.sleep(GAP_MS);
    expect(executions.size).toBe(stoppedWith);
    service = suite.serveTool(tool);

    const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 30_000)));
    for (const [i, runId] of runIds.entries()) {
      expect(statuses[i], runId).toMatchObject({
        status: "committed",
        terminal: { output: `paid run ${i}` },
      });
      await expectChargesInTrail(suite, runId, "pay", executions);
      await expectNoToolFailed(runId);
    }
    // Before, a call that found nobody serving failed after its retries and the model saw the error.
    expect(executions.size).toBe(RUNS * PAYMENTS);
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
    // The workers said why those calls took longer.
    expect(await suite.logs()).toMatch(/nobody serves the tool: the call waits for a service/);
    service.stop();
  }, 60_000);

  it("a run submitted before its tool's service is up (a cluster deployed at once) gets the tool once the service comes up", async () => {
    const { tool, executions } = chargeTool(0, "late_pay");
    const { runId } = await suite.client.submit(payingRun("late_pay", 2, "paid late"));
    await systemClock.sleep(1_500);
    expect(executions.size).toBe(0);
    const service = suite.serveTool(tool);
    const status = await suite.waitFor(runId, settled, 20_000);
    // Before, the worker started the run without the tool, and the model's calls were refused.
    expect(status).toMatchObject({ status: "committed", terminal: { output: "paid late" } });
    expect(executions.size).toBe(2);
    await expectChargesInTrail(suite, runId, "late_pay", executions);
    await expectNoToolFailed(runId);
    service.stop();
  }, 40_000);
});
