import { describe, expect, it } from "vitest";
import { decode } from "../../shared/bus/codec.js";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";

/**
 * Beats three seconds apart, so the periodic beat almost never falls between a job being taken and
 * its worker being killed a moment later: only the announcement a worker sends on taking a job
 * (`workers.took.<instance>`) can name it. Without it the job would wait out the ack wait (60 s here).
 */
const suite = useClusterSuite("presence-new-job", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: {
    AGENT_ACK_WAIT_MS: "60000",
    AGENT_BEAT_MS: "3000",
    AGENT_DEAD_AFTER_MS: "6000",
    AGENT_RETRY_DELAY_MS: "500",
    AGENT_STATUS_EVERY_MS: "0",
  },
});

describe("worker presence: a job just taken", () => {
  it("is named to the other workers at once: kill -9 once its tool call has started, and the survivor hands it back when the silence is confirmed, not after the ack wait", async () => {
    const charge = serveCharge(suite, 1_000, "transfer");
    const reply = await chargeRun(suite, "transfer", 3);
    await charge.started;
    const holder = await suite.lastWriter(reply.runId);
    expect(holder).toMatch(/^agent-[12]$/);
    suite.cluster.signal(holder as string, "SIGKILL");
    const killedAt = Date.now();

    const status = await suite.waitFor(reply.runId, settled, 40_000);
    const tookMs = Date.now() - killedAt;
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 3" } });
    // The dead worker's silence is confirmed at most 6 s after its last beat; the ack wait is 60 s.
    expect(tookMs).toBeLessThan(20_000);
    expect([...charge.executions.values()]).toEqual([1]);
    const survivor = holder === "agent-1" ? "agent-2" : "agent-1";
    expect(await suite.log(survivor)).toMatch(/"jobs":1[^\n]*stopped beating/);
    await suite.cluster.start("agent", `${holder}b`);
  }, 60_000);

  it("is announced the moment it is taken: kill -9 as the announcement goes out, and the survivor still hands the job back", async () => {
    const charge = serveCharge(suite, 1_000, "refund");
    const { nc, subjects } = suite.bus;
    // The first announcement after the submit names this run's job: nothing else is queued.
    const announced = new Promise<WorkerBeat>((resolve) => {
      const sub = nc.subscribe(subjects.workerTookAll(), {
        callback: (err, msg) => {
          if (err) return;
          sub.unsubscribe();
          resolve(decode(WorkerBeat, msg.data));
        },
      });
    });
    await nc.flush();
    const reply = await chargeRun(suite, "refund", 4);
    const took = await announced;
    suite.cluster.signal(took.workerId, "SIGKILL");
    const killedAt = Date.now();
    expect(took.jobs).toHaveLength(1);

    const status = await suite.waitFor(reply.runId, settled, 40_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 4" } });
    expect(Date.now() - killedAt).toBeLessThan(20_000);
    expect([...charge.executions.values()]).toEqual([1]);
    const survivor = await suite.lastWriter(reply.runId);
    expect(survivor).not.toBe(took.workerId);
    expect(await suite.log(survivor as string)).toMatch(
      new RegExp(`"worker":"${took.workerId}"[^\\n]*"jobs":1[^\\n]*stopped beating`),
    );
  }, 60_000);
});
