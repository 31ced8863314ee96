import { jetstream } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { StraySweep, streamSeqOf } from "../../services/agent/strays.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { ackSubject } from "../helpers/fake-worker.js";

const suite = useBusSuite("strays");
const encoder = new TextEncoder();

describe("a survivor's search for jobs delivered to a gone worker's pull", () => {
  it("hands back, on the real work queue, the delivered job nobody names: not a named one, not an acknowledged one, not one never delivered", async () => {
    const { subjects } = suite;
    const consumer = await ensureWorkerConsumer(suite.jsm, subjects, { ackWaitMs: 60_000 });
    const runs = ["named", "stranded", "done", "queued"];
    for (const run of runs) await suite.js.publish(subjects.runQueue(run), encoder.encode(run));

    // The dying worker: its pull takes three jobs, it finishes one, and its connection goes.
    const dying = await connect({
      servers: suite.server.url,
      ...(suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {}),
    });
    const pulled = await jetstream(dying).consumers.get(subjects.streams().runs, consumer);
    const taken = await pulled.fetch({ max_messages: 3, expires: 1_500 });
    const held = new Map<string, string>();
    for await (const msg of taken) {
      const run = new TextDecoder().decode(msg.data);
      if (run === "done") msg.ack();
      else held.set(run, ackSubject(msg));
    }
    await dying.flush();
    await dying.close();
    expect([...held.keys()]).toEqual(["named", "stranded"]);

    // A live worker names "named" (its beat would): it stays where it is.
    const metrics = new ActorMetrics("agent");
    const sweep = new StraySweep({
      bus: { ...suite, logger: silentLogger },
      consumer,
      named: () => new Set([streamSeqOf(held.get("named")!)!]),
      heardCounts: () => new Map(),
      beatMs: 0,
      maxWaitMs: 0,
      metrics,
    });
    sweep.request([]);
    await sweep.idle();
    expect(
      (await metrics.registry.getSingleMetric("agents_stray_jobs_handed_back_total")?.get())?.values[0]
        ?.value,
    ).toBe(1);

    // The stranded job is offered again at once (the ack wait is a minute), then the queued one.
    const next = await jetstream(suite.nc).consumers.get(subjects.streams().runs, consumer);
    const offered: [string, number][] = [];
    for await (const msg of await next.fetch({ max_messages: 3, expires: 1_500 })) {
      offered.push([new TextDecoder().decode(msg.data), msg.info.deliveryCount]);
      msg.ack();
    }
    expect(offered).toEqual([
      ["stranded", 2],
      ["queued", 1],
    ]);
    // The live worker's job ends as it would, on its own ack subject.
    suite.nc.publish(held.get("named")!, encoder.encode("+ACK"));
    await expect
      .poll(async () => (await suite.jsm.consumers.info(subjects.streams().runs, consumer)).num_ack_pending)
      .toBe(0);
  });

  it("a job a gone worker named, just handed back and waiting for a free worker, is not counted stranded", async () => {
    const { subjects } = suite;
    const consumer = await ensureWorkerConsumer(suite.jsm, subjects, { ackWaitMs: 60_000 });
    await suite.js.publish(subjects.runQueue("handed-back"), encoder.encode("handed-back"));
    const pulled = await jetstream(suite.nc).consumers.get(subjects.streams().runs, consumer);
    const msg = await pulled.next({ expires: 2_000 });
    if (!msg) throw new Error("the job was not offered");
    const job = ackSubject(msg);
    const metrics = new ActorMetrics("agent");
    const sweep = new StraySweep({
      bus: { ...suite, logger: silentLogger },
      consumer,
      named: () => new Set(),
      heardCounts: () => new Map(),
      beatMs: 0,
      maxWaitMs: 0,
      metrics,
    });
    sweep.request([job]);
    await sweep.idle();
    expect(
      (await metrics.registry.getSingleMetric("agents_stray_jobs_handed_back_total")?.get())?.values[0]
        ?.value,
    ).toBe(0);
    msg.ack();
  });
});
