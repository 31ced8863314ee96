import { jetstream } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { decode, encode } from "../../shared/bus/codec.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";

const ACK_WAIT_MS = 60_000;
/** No agent worker at first: the job goes to the test's own pull, a worker about to stall. */
const suite = useClusterSuite("stray-suspect", {
  actors: [{ kind: "supervisor" }],
  env: {
    AGENT_ACK_WAIT_MS: String(ACK_WAIT_MS),
    AGENT_BEAT_MS: "250",
    AGENT_DEAD_AFTER_MS: "1000",
    AGENT_STATUS_EVERY_MS: "0",
  },
});

describe("the search for stranded jobs, while another silent worker is being asked whether it is there", () => {
  it("takes none of a stalled worker's jobs: they count as named until the stalled worker is found connected", async () => {
    const charge = serveCharge(suite, 0, "wire");
    const { subjects } = suite.bus;
    const credentials = suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {};
    const stalled = await connect({ servers: suite.server.url, ...credentials });
    const dying = await connect({ servers: suite.server.url, ...credentials });
    // The stalled worker's connection stays open but nothing answers its pings, as with SIGSTOP.
    stalled.subscribe(subjects.workerPing("stalled-worker-1"));
    const jobs: string[] = [];
    const beat = (nc: NatsConnection, instance: string, named: string[]): void =>
      nc.publish(
        subjects.workerBeat(instance),
        encode(WorkerBeat, {
          schemaVersion: 1,
          workerId: instance,
          instance,
          deadAfterMs: 1_000,
          jobs: named,
        }),
      );
    const beatBoth = (): void => {
      beat(stalled, "stalled-worker-1", jobs);
      beat(dying, "dying-worker-1", []);
    };
    beatBoth();
    const beating = setInterval(beatBoth, 200);
    try {
      const consumer = await ensureWorkerConsumer(suite.bus.jsm, subjects, { ackWaitMs: ACK_WAIT_MS });
      const pull = (await jetstream(stalled).consumers.get(subjects.streams().runs, consumer)).next({
        expires: 20_000,
      });
      const reply = await chargeRun(suite, "wire", 7);
      const job = await pull;
      expect(job).not.toBeNull();
      jobs.push((job as unknown as { reply: string }).reply);

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
      await systemClock.sleep(600);
      // Both fall silent together, so the survivor judges them in the same tick: the dying one's
      // connection is gone (its jobs, none, handed back, then the search), while the stalled one's
      // ping waits its full second, over both looks of the search.
      clearInterval(beating);
      beatBoth();
      await systemClock.sleep(300);
      await dying.close();
      await systemClock.sleep(2_500);

      const info = await suite.bus.jsm.consumers.info(subjects.streams().runs, consumer);
      expect(info.num_redelivered).toBe(0);
      expect(info.num_ack_pending).toBe(1);
      const log = await suite.log("agent-1");
      expect(log).toMatch(/"worker":"dying-worker-1"[^\n]*"jobs":0[^\n]*stopped beating/);
      expect(log).toMatch(/"worker":"stalled-worker-1"[^\n]*still connected/);
      expect(log).not.toMatch(/never named by any worker/);

      // The stalled worker lets go of its job; the survivor takes the run to its end.
      job!.nak();
      await stalled.flush();
      const status = await suite.waitFor(reply.runId, settled, 20_000);
      expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 7" } });
      expect([...charge.executions.values()]).toEqual([1]);
    } finally {
      clearInterval(beating);
      for (const nc of [stalled, dying]) if (!nc.isClosed()) await nc.close();
    }
  }, 60_000);
});
