import { describe, expect, it } from "vitest";
import { systemClock } from "../../shared/runtime/clock.js";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { FAST_PRESENCE_ENV, fakeWorker, startHeard } from "../helpers/fake-worker.js";

/** No agent worker at first: the job can only go to the test's own pull, a worker about to die. */
const suite = useClusterSuite("stray-job", { actors: [{ kind: "supervisor" }], env: FAST_PRESENCE_ENV });

describe("a job delivered to a worker's pull as the worker dies", () => {
  it("never named by that worker, is found and handed back by the survivor, not left to the ack wait", async () => {
    const charge = serveCharge(suite, 0, "pay");
    const dying = await fakeWorker(suite, "dying");
    // It beats as a worker does, naming nothing: the job reaches it after its last beat.
    dying.beat();
    const beating = setInterval(() => dying.beat(), 200);
    try {
      const taking = dying.take();
      const reply = await chargeRun(suite, "pay", 5);
      await taking;

      // The survivor starts, and hears the dying worker beat before it goes.
      await startHeard(suite, "agent-1");
      await systemClock.sleep(600);
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
      await dying.close();
    }
  }, 60_000);
});
