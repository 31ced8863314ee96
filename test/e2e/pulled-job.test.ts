import { describe, expect, it } from "vitest";
import { chargeRun, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { fakeWorker, WORKER_ACK_WAIT_MS } from "../helpers/fake-worker.js";

/** No agent worker at first: the job can only go to the test's own pull, a worker about to die. */
const suite = useClusterSuite("pulled-job", {
  actors: [{ kind: "supervisor" }],
  env: { AGENT_ACK_WAIT_MS: String(WORKER_ACK_WAIT_MS) },
});

describe("a job delivered to a worker's pull as the worker dies", () => {
  it("goes to another worker once its ack wait passes: the run commits, the side effect once", async () => {
    const charge = serveCharge(suite, 0, "pay");
    const dying = await fakeWorker(suite);
    const taking = dying.take();
    const reply = await chargeRun(suite, "pay", 5);
    const job = await taking;
    expect(job.info.deliveryCount).toBe(1);
    await dying.close();
    const goneAt = Date.now();
    await suite.cluster.start("agent", "agent-1");

    const status = await suite.waitFor(reply.runId, settled, 30_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 5" } });
    expect(Date.now() - goneAt).toBeLessThan(15_000);
    expect([...charge.executions.values()]).toEqual([1]);
  }, 60_000);
});
