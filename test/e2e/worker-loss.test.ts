import { describe, expect, it } from "vitest";
import { queuedJobKinds } from "../../shared/bus/jobs.js";
import { until } from "../helpers/until.js";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

/**
 * A worker lost mid-run (killed, or stalled past its jobs' ack wait, the production default here):
 * JetStream gives its job to another worker, and the run moves on within seconds.
 */
const suite = useClusterSuite("worker-loss", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: { AGENT_RETRY_DELAY_MS: "500" },
});

describe("a worker lost mid-run: its job goes to another worker after the ack wait", () => {
  /** Submits a run that charges once (through a tool served here) and returns once it is charging. */
  async function charging(tool: string, delayMs: number) {
    const charge = serveCharge(suite, delayMs, tool);
    const reply = await chargeRun(suite, tool, 3);
    await charge.started;
    const holder = await suite.lastWriter(reply.runId);
    // A worker started by an earlier test (agent-1b) may hold it too.
    expect(holder).toMatch(/^agent-\d\w*$/);
    return { runId: reply.runId, holder: holder as string, executions: charge.executions };
  }

  it("kill -9 of the worker mid-tool: the other resumes the run within seconds, the side effect once", async () => {
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
    expect(await suite.logs()).toMatch(new RegExp(`"runId":"${runId}"[^\\n]*taking over the run`));
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
    const holder = await suite.lastWriter(runId);
    expect(holder).toMatch(/^agent-\d\w*$/);
    suite.cluster.signal(holder as string, "SIGKILL");

    // The job delivered again finds its decision applied already: it takes the run over instead.
    const status = await suite.waitFor(runId, settled, 25_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "granted 4" } });
    expect([...grant.executions.values()]).toEqual([1]);
    expect(await suite.logs()).toMatch(
      new RegExp(`"runId":"${runId}"[^\\n]*event applied by this job before`),
    );
    await suite.cluster.start("agent", `${holder as string}c`);
  }, 60_000);

  it("a stalled worker (stopped past the ack wait, its connection open) loses its run to another, safely: when it wakes it is fenced and lets go quietly; the run commits once, the side effect once", async () => {
    const { runId, holder, executions } = await charging("settle", 500);
    suite.cluster.signal(holder, "SIGSTOP");
    // Its renewals stop: after the ack wait JetStream gives the job to the other worker.
    await until(async () => (await suite.lastWriter(runId)) !== holder, 15_000, {
      what: "another worker writing the run",
      everyMs: 100,
    });
    suite.cluster.signal(holder, "SIGCONT");

    const status = await suite.waitFor(runId, settled, 25_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 3" } });
    expect([...executions.values()]).toEqual([1]);
    const events = await suite.audit(runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    expect(events.filter((e) => e.kind === "run.committed")).toHaveLength(1);
    // The stalled copy's next write is refused: it leaves the job to the delivery that drives the
    // run (an ack from it would settle that one's), and its lease does not count as failed.
    await expect
      .poll(async () => await suite.log(holder), { timeout: 10_000 })
      .toMatch(new RegExp(`"runId":"${runId}"[^\n]*fenced: another worker drives this run`));
    expect(await suite.logs()).not.toMatch(new RegExp(`"runId":"${runId}"[^\n]*run lease failed`));
    // The job is acknowledged by the worker that committed the run: none is left queued.
    await expect.poll(() => queuedJobKinds(suite.bus, runId), { timeout: 10_000 }).toEqual([]);
  }, 60_000);

  it("a worker that renews its job late (stopped just past the ack wait) keeps its run: the job's next holder asks it, and leaves the run to it; no takeover, the side effect once", async () => {
    const { runId, holder, executions } = await charging("refund", 500);
    // The job's next holder asks the run's last writer whether it still holds the job: the holder
    // runs again as the question goes out, and answers it.
    const asked = new Promise<void>((resolve) => {
      const sub = suite.bus.nc.subscribe(suite.bus.subjects.workerHolds(holder), {
        callback: () => {
          sub.unsubscribe();
          resolve();
        },
      });
    });
    await suite.bus.nc.flush();
    suite.cluster.signal(holder, "SIGSTOP");
    await asked;
    suite.cluster.signal(holder, "SIGCONT");

    const status = await suite.waitFor(runId, settled, 25_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 3" } });
    expect([...executions.values()]).toEqual([1]);
    const events = await suite.audit(runId);
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(0);
    const logs = await suite.logs();
    expect(logs).toMatch(
      new RegExp(`"runId":"${runId}"[^\\n]*an earlier delivery of this job still drives the run`),
    );
    expect(logs).not.toMatch(new RegExp(`"runId":"${runId}"[^\\n]*fenced`));
    expect(await suite.lastWriter(runId)).toBe(holder);
    await expect.poll(() => queuedJobKinds(suite.bus, runId), { timeout: 10_000 }).toEqual([]);
  }, 60_000);
});
