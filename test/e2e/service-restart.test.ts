import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { ModelRequest, ModelResponse } from "../../shared/contracts/model.js";
import { serveModel } from "../../shared/bus/model-actor.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { defineTool } from "../../shared/tools/tool.js";
import {
  chargeTool,
  expectChargesInTrail,
  expectFirstReviewsPassed,
  payingRun,
  settled,
  submitReviewedRuns,
  useClusterSuite,
} from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const RUNS = 6;
const PAYMENTS = 6;
const PAYMENT_MS = 200;
/** Longer than a call's retries take (about 0.6 s), shorter than AGENT_SERVICE_WAIT_MS (10 s). */
const GAP_MS = 3_000;
const TOOL_OUTAGE_MS = 4_000;

/** Services restarting under runs that call them, on the workers' default wait for a service. */
const suite = useClusterSuite("svc-restart", {
  actors: [
    { kind: "supervisor" },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
    { kind: "critic", name: "critic-1" },
  ],
  // Past one unanswered describe (2 s), short of two with the retry delay between (5 s). Every
  // tool remote, echo included: the services are what restarts.
  env: { AGENT_TOOL_OUTAGE_MS: String(TOOL_OUTAGE_MS), AGENT_LOCAL_TOOLS: "" },
});

/** What the model was told about the run's tool calls: none may have failed. */
async function expectNoToolFailed(runId: string): Promise<void> {
  const events = await suite.audit(runId);
  expect(
    events.filter((e) => e.kind === "tool.aborted" || e.kind === "tool.denied"),
    runId,
  ).toEqual([]);
}

/**
 * Every run commits with its own answer (`<answer> <i>`), each of its payments is in its trail, and
 * no payment ran twice.
 */
async function expectAllPaid(
  runIds: string[],
  tool: string,
  answer: string,
  executions: Map<string, number>,
): Promise<void> {
  const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 30_000)));
  for (const [i, runId] of runIds.entries()) {
    expect(statuses[i], runId).toMatchObject({ status: "committed", terminal: { output: `${answer} ${i}` } });
    await expectChargesInTrail(suite, runId, tool, executions);
  }
  expect([...executions.values()].every((n) => n === 1)).toBe(true);
}

describe("a service that restarts, or starts after the runs needing it", () => {
  it(`stopped for ${GAP_MS} ms while runs pay (a rolling restart): the calls made meanwhile wait for it; every payment happens once, none fails`, async () => {
    const { tool, executions } = chargeTool(PAYMENT_MS, "pay");
    let service = suite.serveTool(tool);
    const runIds: string[] = [];
    for (let run = 0; run < RUNS; run += 1)
      runIds.push((await suite.client.submit(payingRun("pay", PAYMENTS, `paid run ${run}`))).runId);
    await until(() => executions.size >= RUNS, 15_000, { what: "a payment per run" });
    // Stops taking calls; the ones it holds finish and answer, as a draining service does.
    service.stop();
    const stoppedWith = executions.size;
    expect(stoppedWith).toBeGreaterThan(0);
    await systemClock.sleep(GAP_MS);
    expect(executions.size).toBe(stoppedWith);
    service = suite.serveTool(tool);

    await expectAllPaid(runIds, "pay", "paid run", executions);
    for (const runId of runIds) await expectNoToolFailed(runId);
    // Before, a call that found nobody serving failed after its retries and the model saw the error.
    expect(executions.size).toBe(RUNS * PAYMENTS);
    // The workers said why those calls took longer.
    expect(await suite.logs()).toMatch(/"service":"tool:pay".*nobody serves it yet: waiting for a service/);
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

  it(`a model actor stopped for ${GAP_MS} ms while runs ask it (a planner redeployed): the turns asked meanwhile wait for it; every run commits`, async () => {
    const name = "planner";
    let turns = 0;
    /** Two echo calls, then the answer, reading the run's progress from the messages it is sent. */
    const complete = async (request: ModelRequest): Promise<ModelResponse> => {
      turns += 1;
      await systemClock.sleep(300);
      const results = request.messages.filter((m) => m.role === "tool").length;
      const base = { usage: { inputTokens: 1, outputTokens: 1 }, costUsd: 0, model: name };
      return results < 2
        ? {
            ...base,
            text: "",
            stopReason: "toolUse",
            toolCalls: [{ id: `c${results}`, name: "echo", input: { text: `${results}` } }],
          }
        : { ...base, text: "planned", stopReason: "endTurn", toolCalls: [] };
    };
    const echoService = suite.serveTool(echoTool);
    const serve = () => serveModel(name, complete, { ...suite.bus, logger: silentLogger });
    let model = serve();
    const base = spec({ tools: ["echo"] });
    const runIds: string[] = [];
    for (let run = 0; run < RUNS; run += 1) {
      const runSpec = { ...base, agent: { ...base.agent, model: { provider: "actor" as const, name } } };
      runIds.push((await suite.client.submit(runSpec)).runId);
    }
    await until(() => turns >= RUNS, 15_000, { what: "a turn per run" });
    model.unsubscribe();
    await systemClock.sleep(GAP_MS);
    const turnsInGap = turns;
    expect(turnsInGap).toBeLessThan(RUNS * 3);
    model = serve();
    const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 30_000)));
    // Before, a turn that found nobody serving the model failed its run at once.
    for (const [i, runId] of runIds.entries())
      expect(statuses[i], runId).toMatchObject({ status: "committed", terminal: { output: "planned" } });
    expect(turns).toBeGreaterThan(turnsInGap);
    expect(await suite.logs()).toMatch(
      /"service":"model:planner".*nobody serves it yet: waiting for a service/,
    );
    model.unsubscribe();
    echoService.stop();
  }, 60_000);

  it("the critic service gone while runs reach their review (stopped, a new one started): the reviews wait for it; every run commits on its first answer", async () => {
    suite.cluster.signal("critic-1", "SIGTERM");
    await systemClock.sleep(500);
    const runIds = await submitReviewedRuns(suite, RUNS);
    // Every run is waiting for its review before a critic is back.
    await until(
      async () => {
        const statuses = await Promise.all(runIds.map((id) => suite.client.statusOf(id)));
        return statuses.every((s) => s?.status === "running" && s.phase === "CRITIQUE");
      },
      15_000,
      { what: "every run waiting for its review" },
    );
    await suite.cluster.start("critic", "critic-2");
    // Before, a review that found nobody serving sent the answer back for repair, and the model,
    // with nothing more to say, failed the run.
    await expectFirstReviewsPassed(suite, runIds);
    expect(await suite.logs()).toMatch(/"service":"critic".*nobody serves it yet: waiting for a service/);
  }, 60_000);

  it("the supervisor restarted (stopped, a new one started) while runs step: their steps do not need it; no run is handed back", async () => {
    const { tool, executions } = chargeTool(100, "step_pay");
    const service = suite.serveTool(tool);
    const runIds: string[] = [];
    for (let run = 0; run < RUNS; run += 1)
      runIds.push((await suite.client.submit(payingRun("step_pay", 12, `stepped run ${run}`))).runId);
    await until(() => executions.size >= RUNS, 15_000, { what: "a payment per run" });
    // A rolling restart: the old one drains and exits, then the new one starts (about a second).
    suite.cluster.signal("supervisor", "SIGTERM");
    await systemClock.sleep(300);
    await suite.cluster.start("supervisor", "supervisor-2");
    await expectAllPaid(runIds, "step_pay", "stepped run", executions);
    const logs = await suite.logs();
    // A run's steps count its tree's iterations on a JetStream counter: no worker waits for a supervisor.
    expect(logs).not.toMatch(/"service":"supervisor".*nobody serves it yet/);
    expect(logs).not.toMatch(/run lease failed/);
    service.stop();
  }, 60_000);

  // Last in the file: its lease failure is what the test above finds none of in the logs.
  it("a tool service that takes a run's describe and does not answer in time (its reply lost to a NATS server restart): the run is not started without the tool; its lease is retried and it commits", async () => {
    const name = "slow_pay";
    const { tool, executions } = chargeTool(0, name);
    let service: { stop(): void } | undefined;
    let swallowed = 0;
    // Takes the first describe and answers nothing, then the real service comes up: as a worker
    // sees a service whose reply went out while the worker was away.
    const mute = suite.bus.nc.subscribe(suite.bus.subjects.toolDescribe(name), {
      max: 1,
      callback: () => {
        swallowed += 1;
        service = suite.serveTool(tool);
      },
    });
    const { runId } = await suite.client.submit(payingRun(name, 2, "paid after the silence"));
    const status = await suite.waitFor(runId, settled, 30_000);
    expect(swallowed).toBe(1);
    // Before, the unanswered describe left the tool out and the run failed as planInvalid.
    expect(status).toMatchObject({ status: "committed", terminal: { output: "paid after the silence" } });
    expect(executions.size).toBe(2);
    await expectChargesInTrail(suite, runId, name, executions);
    expect(await suite.logs()).toMatch(/"code":"TOOL_TIMEOUT".*run lease failed; the job will be retried/);
    mute.unsubscribe();
    service?.stop();
  }, 40_000);

  it(`a tool service that takes every describe and answers none (hung) is left out of new runs after AGENT_TOOL_OUTAGE_MS (${TOOL_OUTAGE_MS} ms): a new run that needs the tool fails as planInvalid, instead of its job coming back for ever`, async () => {
    const name = "hung_pay";
    let swallowed = 0;
    const hung = suite.bus.nc.subscribe(suite.bus.subjects.toolDescribe(name), {
      callback: () => void (swallowed += 1),
    });
    const submitted = Date.now();
    const { runId } = await suite.client.submit(payingRun(name, 1, "never paid"));
    const status = await suite.waitFor(runId, settled, 30_000);
    expect(status).toMatchObject({ status: "failed", terminal: { reason: "planInvalid" } });
    const failed = (await suite.audit(runId)).find((e) => e.kind === "run.failed");
    expect(failed?.data?.diagnosis).toMatch(`needs unavailable tool '${name}'`);
    // Asked until one worker had seen the silence outlast the bound: two describes at least, a
    // retry delay apart (each worker counts what it saw).
    expect(swallowed).toBeGreaterThanOrEqual(2);
    expect(Date.now() - submitted).toBeGreaterThan(TOOL_OUTAGE_MS);
    const logs = await suite.logs();
    expect(logs).toMatch(new RegExp(`"tool":"${name}"[^\\n]*tool left out of a new run`));
    hung.unsubscribe();
  }, 40_000);

  it("a run that has started goes on with its tool's last descriptor when the tool's service hangs (before, it waited for ever): its call meets the outage, and the run ends by itself", async () => {
    const name = "later_pay";
    const paid: number[] = [];
    // Pays only with a human's approval; a short timeout per attempt, so a hung call ends in seconds.
    const tool = defineTool({
      name,
      description: "Pays an amount once a human approves it.",
      input: z.object({ amount: z.number() }),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      idempotent: false,
      timeoutMs: 1_000,
      execute: (input, ctx) => {
        if (ctx.approval?.token !== "pay-1")
          return Promise.reject(
            new AgentError("APPROVAL_REQUIRED", "a payment needs a human", {
              details: { token: "pay-1", reason: `pay ${input.amount}` },
            }),
          );
        paid.push(input.amount);
        return Promise.resolve({ output: { paid: input.amount } });
      },
    });
    const service = suite.serveTool(tool);
    const { runId } = await suite.client.submit(
      spec({
        script: [{ toolCalls: [{ name, input: { amount: 1 } }] }, { text: "done without paying" }],
        tools: [name],
      }),
    );
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 20_000);
    // The service hangs while the run waits for the approval: it takes every describe and every
    // call, and answers none.
    service.stop();
    const swallowed = { describes: 0, calls: 0 };
    const hung = [
      suite.bus.nc.subscribe(suite.bus.subjects.toolDescribe(name), {
        callback: () => void swallowed.describes++,
      }),
      suite.bus.nc.subscribe(suite.bus.subjects.tool(name), { callback: () => void swallowed.calls++ }),
    ];
    const decided = Date.now();
    await suite.client.decide(runId, { decision: "approve", by: "alice" });
    // The decision's lease could not describe the tool: a worker that had described it went on, and
    // made the approved call. Before, the run stayed awaiting approval while the service hung.
    const status = await suite.waitFor(runId, settled, 60_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "done without paying" } });
    expect(Date.now() - decided).toBeLessThan(45_000);
    expect(swallowed.describes).toBeGreaterThanOrEqual(1);
    expect(swallowed.calls).toBeGreaterThanOrEqual(1);
    expect(paid).toEqual([]);
    // The model was told the approved call timed out: nothing claimed it, nothing to reconcile.
    const aborted = (await suite.audit(runId)).filter((e) => e.kind === "tool.aborted").map((e) => e.reason);
    expect(aborted).toEqual([
      expect.stringMatching(/^\[APPROVAL_REQUIRED\]/),
      expect.stringMatching(/^\[TOOL_TIMEOUT\]/),
    ]);
    const logs = await suite.logs();
    expect(logs).toMatch(
      new RegExp(`"tool":"${name}","service":"no answer"[^\\n]*goes on with the tool's last descriptor`),
    );
    expect(logs).not.toMatch(new RegExp(`"tool":"${name}"[^\\n]*tool left out of a new run`));
    for (const sub of hung) sub.unsubscribe();
  }, 90_000);
});
