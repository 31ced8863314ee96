import { jetstream } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { decode, encode } from "../../shared/bus/codec.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";

const ACK_WAIT_MS = 60_000;
/** No agent worker at first: the job can only go to the test's own pull, a worker about to die. */
const suite = useClusterSuite("stray-job", {
  actors: [{ kind: "supervisor" }],
  env: {
    AGENT_ACK_WAIT_MS: String(ACK_WAIT_MS),
    AGENT_BEAT_MS: "250",
    AGENT_DEAD_AFTER_MS: "1000",
    AGENT_STATUS_EVERY_MS: "0",
  },
});

describe("a job delivered to a worker's pull as the worker dies", () => {
  it("never named by that worker, is found and handed back by the survivor, not left to the ack wait", async () => {
    const charge = serveCharge(suite, 0, "pay");
    const { subjects } = suite.bus;
    const dying = await connect({
      servers: suite.server.url,
      ...(suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {}),
    });
    // It beats as a worker does, naming nothing: the job reaches it after its last beat.
    const instance = "dying-worker-1";
    const beat = (): void =>
      dying.publish(
        subjects.workerBeat(instance),
        encode(WorkerBeat, { schemaVersion: 1, workerId: "dying", instance, deadAfterMs: 1_000, jobs: [] }),
      );
    beat();
    const beating = setInterval(beat, 200);
    try {
      const consumer = await ensureWorkerConsumer(suite.bus.jsm, subjects, { ackWaitMs: ACK_WAIT_MS });
      const pull = (await jetstream(dying).consumers.get(subjects.streams().runs, consumer)).next({
        expires: 20_000,
      });
      const reply = await chargeRun(suite, "pay", 5);
      expect(await pull).not.toBeNull();

      // The survivor starts, and hears the dying worker beat before it goes.
      const survivorBeat = new Promise<void>((resolve) => {
        const sub = suite.bus.nc.subscribe(subjects.workerBeatAll(), {
          callback: (err, msg) => {
            if (err || decode(WorkerBeat, msg.data).workerId !== "agent-1") return;
            sub.unsubscribe();
            resolve();
          },
        });
      });
      await suite.cluster.start("agent", "agent-1");
      await survivorBeat;
      await new Promise((resolve) => setTimeout(resolve, 600));
      clearInterval(beating);
      await dying.close();
      const goneAt = Date.now();

      const status = await suite.waitFor(reply.runId, settled, 40_000);
      expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 5" } });
      // Its silence is confirmed a second after its last beat, the job found two beats later.
      expect(Date.now() - goneAt).toBeLessThan(15_000);
      expect([...charge.executions.values()]).toEqual([1]);
      const log = await suite.log("agent-1");
      expect(log).toMatch(/"worker":"dying"[^\n]*"jobs":0[^\n]*stopped beating/);
      expect(log).toMatch(/"jobs":1[^\n]*never named by any worker/);
    } finally {
      clearInterval(beating);
      if (!dying.isClosed()) await dying.close();
    }
  }, 60_000);
});
