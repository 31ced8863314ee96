import { describe, expect, it } from "vitest";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import { encode } from "../../shared/bus/codec.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

/**
 * Workers beat to each other, so a dead worker's runs move on in about a second, long before the
 * job's ack wait (the production default, 30 s, here) would hand them over.
 */
const suite = useClusterSuite("presence", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: { AGENT_ACK_WAIT_MS: "30000", AGENT_RETRY_DELAY_MS: "500", AGENT_STATUS_EVERY_MS: "0" },
});

describe("worker presence: a silent worker's jobs go back to the queue at once", () => {
  /** Submits a run that charges once (through a tool served here) and returns once it is charging. */
  async function charging(tool: string, delayMs: number) {
    const charge = serveCharge(suite, delayMs, tool);
    const reply = await chargeRun(suite, tool, 3);
    await charge.started;
    // A worker announces a job the moment it takes it (presence-new-job.test.ts kills it then).
    await systemClock.sleep(100);
    const holder = await suite.lastWriter(reply.runId);
    // A worker started by an earlier test (agent-1b) may hold it too.
    expect(holder).toMatch(/^agent-\d\w*$/);
    return { runId: reply.runId, holder: holder as string, executions: charge.executions };
  }

  it("kill -9 of the worker mid-tool: the other resumes the run within seconds (ack wait 30 s), the side effect once", async () => {
    const { runId, holder, executions } = await charging("transfer", 1_500);
    suite.cluster.signal(holder, "SIGKILL");
    const killedAt = Date.now();

    const status = await suite.waitFor(runId, settled, 25_000);
    const tookMs = Date.now() - killedAt;
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 3" } });
    expect(tookMs).toBeLessThan(10_000);
    expect([...executions.values()]).toEqual([1]);
    const events = await suite.audit(runId);
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    const survivor = holder === "agent-1" ? "agent-2" : "agent-1";
    expect(await suite.log(survivor)).toMatch(/"jobs":1[^\n]*stopped beating/);
    await suite.cluster.start("agent", `${holder}b`);
  }, 60_000);

  it("kill -9 of the worker that made an approved call, mid-call: the decision's job, delivered again, takes the run over where it stopped (the decision applied already)", async () => {
    const grant = serveCharge(suite, 1_500, "grant", "grant-1");
    const { runId } = await suite.client.submit(
      spec({
        script: [{ toolCalls: [{ name: "grant", input: { amount: 4 } }] }, { text: "granted 4" }],
        tools: ["grant"],
      }),
    );
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 10_000);
    await suite.client.decide(runId, { decision: "approve", by: "oncall" });
    await grant.started;
    await systemClock.sleep(100);
    const holder = await suite.lastWriter(runId);
    expect(holder).toMatch(/^agent-\d\w*$/);
    suite.cluster.signal(holder as string, "SIGKILL");

    // Before, the job delivered again was dropped as stale (the run no longer waited for a
    // decision), and the run waited for the stall scan (SUPERVISOR_STALL_MS, 10 minutes).
    const status = await suite.waitFor(runId, settled, 25_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "granted 4" } });
    expect([...grant.executions.values()]).toEqual([1]);
    expect(await suite.logs()).toMatch(
      new RegExp(`"runId":"${runId}"[^\\n]*event applied by this job before`),
    );
    await suite.cluster.start("agent", `${holder as string}c`);
  }, 60_000);

  it("a stalled worker (stopped 2.5 s: no beats, but its connection open) keeps its run: no takeover, no fencing", async () => {
    const { runId, holder, executions } = await charging("settle", 500);
    suite.cluster.signal(holder, "SIGSTOP");
    await systemClock.sleep(2_500);
    suite.cluster.signal(holder, "SIGCONT");

    const status = await suite.waitFor(runId, settled, 25_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 3" } });
    expect([...executions.values()]).toEqual([1]);
    expect((await suite.audit(runId)).filter((e) => e.kind === "run.resumed")).toHaveLength(0);
    const logs = await suite.logs();
    expect(logs).toMatch(/missed its beats but is still connected/);
    expect(logs).not.toMatch(new RegExp(`"runId":"${runId}"[^\n]*fenced`));
  }, 60_000);

  it("a beat nobody can read is logged and ignored; a forged beat cannot make a worker NAK anything but jobs", async () => {
    const { nc, subjects } = suite.bus;
    nc.publish(subjects.workerBeat("forged"), new TextEncoder().encode("{not json"));
    const forged: WorkerBeat = {
      schemaVersion: 1,
      workerId: "forger",
      instance: "forged-1",
      deadAfterMs: 200,
      jobs: ["$JS.ACK.SOMEONE_ELSES_STREAM.consumer.1.1.1.0.0"],
    };
    nc.publish(subjects.workerBeat(forged.instance), encode(WorkerBeat, forged));
    await systemClock.sleep(1_000);
    const logs = await suite.logs();
    expect(logs).toMatch(/unreadable worker beat ignored/);
    expect(logs).toMatch(/"worker":"forger"[^\n]*"jobs":0[^\n]*stopped beating/);

    const reply = await suite.client.submit(spec({ script: [{ text: "still here" }], tools: [] }));
    const status = await suite.waitFor(reply.runId, settled, 20_000);
    expect(status).toMatchObject({ status: "committed" });
  }, 30_000);
});
