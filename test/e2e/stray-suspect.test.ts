import { describe, expect, it } from "vitest";
import { WORKER_CONSUMER } from "../../shared/bus/jobs.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { ackSubject, FAST_PRESENCE_ENV, fakeWorker, startHeard } from "../helpers/fake-worker.js";

/** No agent worker at first: the job goes to the test's own pull, a worker about to stall. */
const suite = useClusterSuite("stray-suspect", { actors: [{ kind: "supervisor" }], env: FAST_PRESENCE_ENV });

describe("the search for stranded jobs, while another silent worker is being asked whether it is there", () => {
  it("takes none of a stalled worker's jobs: they count as named until the stalled worker is found connected", async () => {
    const charge = serveCharge(suite, 0, "wire");
    const { subjects } = suite.bus;
    const stalled = await fakeWorker(suite, "stalled-worker-1");
    const dying = await fakeWorker(suite, "dying-worker-1");
    // The stalled worker's connection stays open but nothing answers its pings, as with SIGSTOP.
    stalled.nc.subscribe(subjects.workerPing("stalled-worker-1"));
    const jobs: string[] = [];
    const beatBoth = (): void => {
      stalled.beat(jobs);
      dying.beat();
    };
    beatBoth();
    const beating = setInterval(beatBoth, 200);
    try {
      const taking = stalled.take();
      const reply = await chargeRun(suite, "wire", 7);
      const job = await taking;
      jobs.push(ackSubject(job));

      await startHeard(suite, "agent-1");
      await systemClock.sleep(600);
      // Both fall silent together, so the survivor judges them in the same tick: the dying one's
      // connection is gone (its jobs, none, handed back, then the search), while the stalled one's
      // ping waits its full second, over both looks of the search.
      clearInterval(beating);
      beatBoth();
      await systemClock.sleep(300);
      await dying.close();
      await systemClock.sleep(2_500);

      const info = await suite.bus.jsm.consumers.info(subjects.streams().runs, WORKER_CONSUMER);
      expect(info.num_redelivered).toBe(0);
      expect(info.num_ack_pending).toBe(1);
      const log = await suite.log("agent-1");
      expect(log).toMatch(/"worker":"dying-worker-1"[^\n]*"jobs":0[^\n]*stopped beating/);
      expect(log).toMatch(/"worker":"stalled-worker-1"[^\n]*still connected/);
      expect(log).not.toMatch(/never named by any worker/);

      // The stalled worker lets go of its job; the survivor takes the run to its end.
      job.nak();
      await stalled.nc.flush();
      const status = await suite.waitFor(reply.runId, settled, 20_000);
      expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 7" } });
      expect([...charge.executions.values()]).toEqual([1]);
    } finally {
      clearInterval(beating);
      await Promise.all([stalled.close(), dying.close()]);
    }
  }, 60_000);
});
